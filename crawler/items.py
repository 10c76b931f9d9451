"""What the spider hands to the pipeline: a fetched page, or why a URL gave no page."""

from __future__ import annotations

from dataclasses import dataclass, field

#: How a page's bytes were obtained.
NETWORK = "network"  # downloaded in full
STORED = "stored"  # fetched recently (campaign refetch_days): the stored copy, no request made
NOT_MODIFIED = "not_modified"  # a conditional GET answered 304: the stored copy is current


@dataclass
class FetchedPage:
    """A response for a page URL, before decoding and extraction."""

    url: str  # canonical URL of the final response: the page's key
    final_url: str  # the URL as the server answered it (after redirects)
    status: int
    headers: dict[str, str]
    body: bytes = field(repr=False)
    source: str = NETWORK
    redirected_from: list[str] = field(default_factory=list)
    book: bool = False  # fetched as a whole-book download (a link naming or saying so)
    rendered: bool = False  # its scripts were run in a browser (crawler.rendering)
    next_url: str | None = None  # the page continuing this one ("下一页"), same site
    previous_url: str | None = None  # the page this one continues (it was its next_url)
    ip_address: str | None = None  # the address the response came from (its hosting network)
    images: list[str] = field(default_factory=list)  # its article's images, to read (ocr)
    images_over_limit: int = 0  # more article images than COPYTRACK_OCR_IMAGES, not read


@dataclass
class FetchedImage:
    """An image of a page's article, fetched to be read by OCR (crawler.images)."""

    url: str
    content_type: str | None
    body: bytes = field(repr=False)


@dataclass
class PageProblem:
    """A URL that yielded no page: a policy refused it (``skipped``) or the fetch failed."""

    url: str
    reason: str  # short key: robots, private_address, too_large, http_404, timeout, …
    detail: str
    skipped: bool
    status: int | None = None


@dataclass
class DroppedLinks:
    """Links of a page (feed, sitemap) not followed, for the run's counts."""

    url: str  # canonical URL of the page
    count: int
    reason: str  # links_over_limit (COPYTRACK_MAX_LINKS_PER_PAGE), bad_url (no request)
