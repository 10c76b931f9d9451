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
# Article pages are far smaller; bigger bodies are archives, media or traps. Scrapy applies
# it to decompressed bodies too (HttpCompressionMiddleware, gzipped sitemaps), in 64 KB
# steps: a gzip bomb stops after 3 MB of output, whatever it would inflate to.
DOWNLOAD_MAXSIZE = 3 * 1024 * 1024
DOWNLOAD_WARNSIZE = 1024 * 1024
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
COOKIES_ENABLED = False  # nothing copytrack reads needs a session

# The private-network rule is applied where Scrapy resolves the hosts it connects to
# (tracker/core/netguard.py, crawler/resolver.py). Through a proxy the connection would go to
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

# The crawl's own limits (the head and book caps, links per page and sitemap, extraction
# processes and their CPU time, rendering, progress, store patience) are declared with every
# setting, meaning and default, in tracker/core/config.py CRAWL_LIMITS; crawler.run adds them as
# the environment sets them.
