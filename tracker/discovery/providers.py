"""Search engines behind one small interface: ``search(query) -> [SearchResult]``.

``SearxngProvider`` asks a SearXNG instance's JSON API (``/search?q=…&format=json``; the
instance must list ``json`` under ``search.formats`` in its settings.yml) — an open-source
meta-search engine users run themselves, the default. ``BraveProvider`` asks the Brave
Search API (``X-Subscription-Token``), a commercial one. Both are endpoints the operator
configures (COPYTRACK_SEARCH_URL), so they are not under the crawl's private-network rule:
a SearXNG on the same private network is the usual set-up. The results are crawled under
it, like any URL.

An API key travels in a request header only, never in a URL, a log line or an error.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..core.config import Settings

__all__ = [
    "BraveProvider",
    "SearchError",
    "SearchProvider",
    "SearchResult",
    "SearxngProvider",
    "provider_from_settings",
]

#: Seconds a search engine may take to answer.
TIMEOUT = 20.0
#: Bytes of an answer read at most (a page of results is a few kilobytes).
MAX_ANSWER = 4 * 1024 * 1024
USER_AGENT = "copytrack/0.1 (copyright-tracking discovery)"
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"


class SearchError(RuntimeError):
    """A search engine could not be asked, or answered something else than results."""


@dataclass(frozen=True)
class SearchResult:
    url: str
    title: str = ""


class SearchProvider(Protocol):
    """A web search engine: ``name`` (for its cache and budget) and ``search``."""

    @property
    def name(self) -> str: ...  # read only: the providers are frozen

    def search(self, query: str) -> list[SearchResult]:
        """The results for ``query``, best first; SearchError when it cannot answer."""
        ...


def _get(url: str, headers: dict[str, str], what: str) -> Any:
    """The JSON answer of a GET; SearchError naming ``what`` (never a key) otherwise."""
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **headers})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            body = answer.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as err:
        hint = " (is the API key right?)" if err.code in (401, 403) else ""
        raise SearchError(f"{what} answered HTTP {err.code} {err.reason}{hint}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise SearchError(f"{what} cannot be reached: {reason}") from None
    if len(body) > MAX_ANSWER:
        raise SearchError(f"{what} answered more than {MAX_ANSWER // 2**20} MB")
    try:
        return json.loads(body)
    except ValueError:
        raise SearchError(f"{what} did not answer JSON") from None


def _results(items: Any, url_key: str) -> list[SearchResult]:
    found = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        url = item.get(url_key)
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            found.append(SearchResult(url, str(item.get("title") or "")))
    return found


@dataclass(frozen=True)
class SearxngProvider:
    """A SearXNG instance at ``base_url`` (``http://searxng:8080``)."""

    base_url: str
    name: str = "searxng"

    def search(self, query: str) -> list[SearchResult]:
        url = f"{self.base_url.rstrip('/')}/search?" + urllib.parse.urlencode(
            {"q": query, "format": "json"}
        )
        what = f"SearXNG at {self.base_url}"
        answer = _get(url, {"Accept": "application/json"}, what)
        if not isinstance(answer, dict) or "results" not in answer:
            raise SearchError(f"{what} answered JSON without results")
        return _results(answer["results"], "url")


@dataclass(frozen=True)
class BraveProvider:
    """The Brave Search API (a subscription token)."""

    api_key: str = field(repr=False)
    endpoint: str = BRAVE_URL
    name: str = "brave"

    def search(self, query: str) -> list[SearchResult]:
        url = f"{self.endpoint}?" + urllib.parse.urlencode({"q": query, "count": 20})
        headers = {"Accept": "application/json", "X-Subscription-Token": self.api_key}
        answer = _get(url, headers, f"Brave Search at {self.endpoint}")
        web = answer.get("web") if isinstance(answer, dict) else None
        return _results(web.get("results") if isinstance(web, dict) else [], "url")


def provider_from_settings(settings: Settings) -> SearchProvider:
    """The search engine the settings name; SearchError saying what to set when none is."""
    if settings.search_provider == "brave":
        if not settings.search_api_key:
            raise SearchError(
                "COPYTRACK_SEARCH_PROVIDER=brave needs COPYTRACK_SEARCH_API_KEY (a Brave "
                "Search API subscription token)"
            )
        return BraveProvider(settings.search_api_key, settings.search_url or BRAVE_URL)
    if not settings.search_url:
        raise SearchError(
            "no search engine: set COPYTRACK_SEARCH_URL to your SearXNG (e.g. "
            "http://searxng:8080, with json among its search formats), or "
            "COPYTRACK_SEARCH_PROVIDER=brave and COPYTRACK_SEARCH_API_KEY"
        )
    return SearxngProvider(settings.search_url)
