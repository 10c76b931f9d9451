"""One page, no crawl: ``fetch_text(url)`` for `copytrack check URL`, and ``html_to_text``
for HTML files given to `copytrack library add` and `check`.

``fetch_text`` uses a plain HTTP client (urllib) with the crawler's User-Agent, size cap
and private-network rule (checked for every redirect too). It is a user's one-off
look-up, like a browser's, so it does not consult robots.txt.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from email.message import Message
from typing import IO, Any

from tracker.config import Settings

from . import settings as crawl_settings
from .decoding import decode_html
from .extraction import extract
from .netguard import check_url

__all__ = ["FetchError", "fetch_text", "html_to_text"]


class FetchError(ValueError):
    """The URL could not be fetched, or holds no article text."""


def html_to_text(body: bytes, content_type: str | None = None, url: str | None = None) -> str:
    """Article text of an HTML page given as bytes; FetchError if it has none.

    Raises crawler.decoding.UnusableContent (a ValueError) for binary or empty bodies.
    """
    found = extract(decode_html(body, content_type).text, url)
    if not found.text:
        raise FetchError(f"no article text found ({found.reason})")
    return found.text


class _GuardedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects only to URLs that pass the private-network rule."""

    def __init__(self, allow_private: bool) -> None:
        self.allow_private = allow_private

    def redirect_request(
        self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
        headers: Message, newurl: str,
    ) -> urllib.request.Request | None:  # fmt: skip
        _check(newurl, self.allow_private)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _check(url: str, allow_private: bool) -> None:
    if not url.lower().startswith(("http://", "https://")):
        raise FetchError(f"{url}: only http and https URLs can be fetched")
    try:
        check_url(url, allow_private)
    except OSError as err:
        raise FetchError(f"{url}: cannot resolve its host: {err}") from None
    except ValueError as err:
        raise FetchError(f"{url}: {err}") from None


def fetch_text(
    url: str,
    allow_private: bool | None = None,
    timeout: float = crawl_settings.DOWNLOAD_TIMEOUT,
    max_bytes: int = crawl_settings.DOWNLOAD_MAXSIZE,
) -> str:
    """Fetch one URL and return its article text.

    ``allow_private`` defaults to COPYTRACK_ALLOW_PRIVATE_NETWORKS. Raises FetchError
    (a ValueError) when the URL is refused, unreachable, too big or has no article text.
    """
    if allow_private is None:
        allow_private = Settings.from_env().allow_private_networks
    _check(url, allow_private)
    opener = urllib.request.build_opener(_GuardedRedirects(allow_private))
    request = urllib.request.Request(url, headers={"User-Agent": crawl_settings.USER_AGENT})
    try:
        with opener.open(request, timeout=timeout) as response:
            body = response.read(max_bytes + 1)
            content_type = response.headers.get("Content-Type")
            final_url: Any = response.url
    except urllib.error.HTTPError as err:
        raise FetchError(f"{url}: HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise FetchError(f"{url}: cannot fetch: {reason}") from None
    if len(body) > max_bytes:
        raise FetchError(f"{url}: larger than {max_bytes // 2**20} MB")
    return html_to_text(body, content_type, final_url)
