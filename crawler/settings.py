"""Scrapy settings of copytrack's crawler; `crawler.run` adds each campaign's overrides.

Politeness first: robots.txt obeyed, AutoThrottle adapting the delay to each site's
latency, few parallel requests per site, a size cap, an honest User-Agent.
Components are named by dotted path, in Scrapy's layout.
"""

BOT_NAME = "copytrack"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"

# Honest and reachable: site owners must be able to see who crawls them and why.
# Placeholder contact: deployments set COPYTRACK's own URL and mailbox here.
USER_AGENT = (
    "copytrack/0.1 (copyright-tracking crawler; +https://copytrack.example/bot; "
    "contact: crawler@copytrack.example)"
)
ROBOTSTXT_OBEY = True
ROBOTSTXT_USER_AGENT = "copytrack"

# Politeness defaults; a campaign's `delay` and `concurrency` override them.
CONCURRENT_REQUESTS = 32
CONCURRENT_REQUESTS_PER_DOMAIN = 2
DOWNLOAD_DELAY = 1.0
AUTOTHROTTLE_ENABLED = True
AUTOTHROTTLE_START_DELAY = 1.0
AUTOTHROTTLE_MAX_DELAY = 30.0
AUTOTHROTTLE_TARGET_CONCURRENCY = 2.0

# Limits on what the crawled sites control (crawler.fetch applies them to `copytrack check
# URL` too). Each refusal is counted in the run (`copytrack campaign show`) under its
# reason: skipped.too_large, too_large_decompressed, too_many_redirects, links_over_limit,
# bad_url; failed.invalid_sitemap for a sitemap bomb, failed.headers_too_large and
# headers_too_slow for a response's head (crawler/heads.py).
DOWNLOAD_TIMEOUT = 30  # seconds for a whole download, however slowly the bytes trickle
# A response's head (status line and headers), which DOWNLOAD_MAXSIZE does not count: at most
# this many bytes and header lines (browsers take 256 KB; a site's head is a few KB and
# a few dozen lines), whole this many seconds after its first byte. 0: no limit.
COPYTRACK_MAX_HEADER_BYTES = 256 * 1024
COPYTRACK_MAX_HEADERS = 100
COPYTRACK_HEADER_SECONDS = 10.0
# Article pages are far smaller; bigger bodies are archives, media or traps. Scrapy applies
# it to decompressed bodies too (HttpCompressionMiddleware, gzipped sitemaps), in 64 KB
# steps: a gzip bomb stops after 3 MB of output, whatever it would inflate to.
DOWNLOAD_MAXSIZE = 3 * 1024 * 1024
DOWNLOAD_WARNSIZE = 1024 * 1024
# Whole-book downloads (a link to a .txt, .zip, .epub or .pdf, or one saying "TXT下载" /
# "全本下载") may be this big; what an archive inflates to is bounded the same
# (extractor.books).
COPYTRACK_BOOK_MAXSIZE = 64 * 1024 * 1024
RETRY_ENABLED = True
RETRY_TIMES = 2
RETRY_HTTP_CODES = [500, 502, 503, 504, 522, 524, 408, 429]
# Moved pages take one or two hops (http → https → new path); longer chains are loops or
# traps.
REDIRECT_MAX_TIMES = 5
# A <meta http-equiv="refresh"> is not a redirect: the page that carries it is what its
# visitors read until it fires, so it is stored and scanned, and the refresh target is
# followed as one more link (crawler/spiders/campaign.py).
METAREFRESH_ENABLED = False
# Links followed from one page (or feed) in document order; the rest are dropped and
# counted: generated link farms and calendar traps would otherwise flood the queue. 0: no
# limit.
COPYTRACK_MAX_LINKS_PER_PAGE = 500
# URLs followed from one sitemap (or sitemaps from one index): the protocol's maximum.
COPYTRACK_MAX_SITEMAP_URLS = 50_000
COOKIES_ENABLED = False  # nothing copytrack reads needs a session

# The private-network rule is applied where Scrapy resolves the hosts it connects to
# (tracker/netguard.py, crawler/resolver.py). Through a proxy the connection would go to
# the proxy, whose fetches the rule cannot see: no proxies from the environment.
TWISTED_DNS_RESOLVER = "crawler.resolver.GuardedResolver"
HTTPPROXY_ENABLED = False
# Web pages only: no file://, data:, s3:// or ftp:// URL is fetched, whoever links to it.
# HTTP(S) by Scrapy's handler with limits on each response's head (crawler/heads.py).
DOWNLOAD_HANDLERS = {
    "http": "crawler.download_handler.HeadLimitedDownloadHandler",
    "https": "crawler.download_handler.HeadLimitedDownloadHandler",
    "file": None,
    "data": None,
    "s3": None,
    "ftp": None,
}
# No listening ports of its own: the crawl is controlled through its run.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False

# Breadth-first: shallow pages (lists, feeds) first, FIFO queues.
DEPTH_PRIORITY = 1
SCHEDULER_DISK_QUEUE = "scrapy.squeues.PickleFifoDiskQueue"
SCHEDULER_MEMORY_QUEUE = "scrapy.squeues.FifoMemoryQueue"

DOWNLOADER_MIDDLEWARES = {
    # Replaced by CampaignScopeMiddleware: Scrapy's offsite check ignores ports.
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    "crawler.middlewares.CampaignScopeMiddleware": 50,
    # Before robots.txt (100): no robots.txt request to a private host either.
    "crawler.middlewares.PrivateNetworkMiddleware": 60,
    # After robots.txt: a page robots.txt now forbids is not served from the store.
    "crawler.middlewares.RefetchPolicyMiddleware": 110,
}
ITEM_PIPELINES = {
    "crawler.pipelines.EvidencePipeline": 300,
}

# Decoding, extraction and storing run in this many worker processes (CPU-bound; the
# reactor's thread keeps downloading meanwhile). 0: one per CPU.
COPYTRACK_EXTRACT_PROCESSES = 0
# ... this much nicer than the crawl (Linux): downloading comes first. Extraction competing
# for the CPU delays the reactor's reading of responses; AutoThrottle takes that for the
# sites' latency and slows the crawl (for the rest of it, if only error pages follow).
# On a machine busy with other work the workers wait their turn, and Scrapy stops
# downloading while their pages exceed SCRAPER_SLOT_MAX_ACTIVE_SIZE.
COPYTRACK_EXTRACT_NICENESS = 10
# A page whose decoding and extraction take more CPU time than this (seconds) is stored
# without text, skip reason "too_slow", rather than hold a worker (pages take 0.01-0.5 s).
COPYTRACK_EXTRACT_CPU_SECONDS = 60.0
# A campaign that renders pages (its `render` option) runs their scripts in Chromium
# (crawler/rendering.py): this many pages at once, each given this many seconds (its
# scripts' requests until the network is idle included), and at most this many requests
# of its own (scripts, XHR, fetch; images, styles and fonts are never fetched).
COPYTRACK_RENDER_PAGES = 4
COPYTRACK_RENDER_TIMEOUT = 20.0
COPYTRACK_RENDER_REQUESTS = 50
# 1: a page's scripts may fetch from other sites too (the CDN its reader script loads
# from); 0: only from the campaign's own domains.
COPYTRACK_RENDER_OFFSITE = 1
# Counts reach the run document at least this often (seconds).
COPYTRACK_PROGRESS_EVERY = 2.0
# A page that cannot be stored (a server down or moved, a full disk) is stored again for
# this long (seconds), the servers looked for between tries; then the crawl stops and its
# run fails naming the failure (crawler/pipelines.py).
COPYTRACK_STORE_PATIENCE = 120.0
