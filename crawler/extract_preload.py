"""What the extraction workers' forkserver imports once for all of them (its preload, set
by `crawler.pipelines.EvidencePipeline`): the pipeline module, and the data trafilatura
loads lazily, on a worker's first pages otherwise (the list of top-level domains, for
hosts given as addresses; jusText's stop words of every language; dateparser's locales,
every one of which it loads, a second of CPU, on the first date string none of them reads,
which htmldate's search of a page's text sends it sooner or later). Workers forked from the
server start warm.

Importing it elsewhere only fills those caches (a second and a half of CPU).
"""

from dateparser import DateDataParser
from trafilatura.external import jt_stoplist_init

from .pipelines import digest

_PAGE = (
    b"<html><head><title>Warm-up</title><meta name='author' content='Copytrack'></head>"
    b"<body><article><p>" + b"A paragraph of an article, long enough to be its text. " * 8 +
    b"</p></article></body></html>"
)  # fmt: skip

digest(_PAGE, "text/html; charset=utf-8", "http://192.0.2.1:8080/2024/01/warm-up.html")
jt_stoplist_init()  # used when trafilatura falls back to jusText without a language
DateDataParser().get_date_data("12 xyzzy 2024")  # a date no locale reads: all are loaded
