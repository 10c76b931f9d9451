"""What the extraction workers' forkserver imports once for all of them (its preload, set by
`crawler.pipelines.EvidencePipeline`): what a worker runs (`crawler.storing`, without
Scrapy), and the data trafilatura loads lazily, on a worker's first pages otherwise (the
list of top-level domains, for hosts given as addresses; jusText's stop words of every
language). Workers forked from the server start warm. (dateparser's locales are not loaded:
the crawl reads a page's date from its markup only, and htmldate asks dateparser only when
it searches a page's text, which the scans do for pages with findings,
`tracker.scanning.pages.text_date`.)

Importing it elsewhere only fills those caches.
"""

from trafilatura.external import jt_stoplist_init

from .digest import digest
from .storing import store_fetched as store_fetched  # what the workers run

_PAGE = (
    b"<html><head><title>Warm-up</title><meta name='author' content='Copytrack'></head>"
    b"<body><article><p>" + b"A paragraph of an article, long enough to be its text. " * 8 +
    b"</p></article></body></html>"
)  # fmt: skip

digest(_PAGE, "text/html; charset=utf-8", "http://192.0.2.1:8080/2024/01/warm-up.html")
jt_stoplist_init()  # used when trafilatura falls back to jusText without a language
