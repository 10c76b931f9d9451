"""Stored pages looked up by URL in batches, for the crawl's reactor thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from pymongo.collection import Collection

from tracker.context import process_context

#: URLs asked for in one query at most.
BATCH = 100
#: Sites with more stored pages than this are not held in memory: each URL is looked up.
SITE_URLS_MAX = 100_000


def stored_pages() -> Collection[Any]:
    """The pages collection of this process's context as it is now."""
    return process_context().db.pages


class PageLookup:
    """Stored pages by URL, looked up in batches: the URLs asked for while a query is out
    go together in the next one (``$in``, up to BATCH URLs), so a busy crawl makes one
    query per round trip instead of one per request, and a quiet one still waits for one
    round trip only.

    ``by_site``: the URLs stored on a site (scheme, host and port) are read in one query
    when the site is first asked for, and the others are answered at once: a crawl looks
    up only the pages it has. A page stored after that (by another crawl) counts as not
    stored.
    """

    def __init__(
        self,
        pages: Collection[Any] | Callable[[], Collection[Any]],
        fields: tuple[str, ...],
        by_site: bool = False,
    ) -> None:
        # A function giving the collection as it is now: a crawl that followed its servers
        # to other ports reads them there.
        self.pages = (lambda: pages) if isinstance(pages, Collection) else pages
        self.projection = dict.fromkeys(("url", *fields), 1)
        self.by_site = by_site
        self._sites: dict[str, asyncio.Task[frozenset[str] | None]] = {}
        self._waiting: dict[str, list[asyncio.Future[dict[str, Any] | None]]] = {}
        self._querying: asyncio.Task[None] | None = None

    async def get(self, url: str) -> dict[str, Any] | None:
        """The stored page of this (canonical) URL with the fields asked for, or None."""
        if self.by_site:
            stored = await self._site_urls(url)
            if stored is not None and url not in stored:
                return None
        found = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(url, []).append(found)
        if self._querying is None:
            self._querying = asyncio.ensure_future(self._query())
        return await found

    async def _query(self) -> None:
        try:
            while self._waiting:
                urls = list(self._waiting)[:BATCH]
                waiting = [(url, self._waiting.pop(url)) for url in urls]
                pages: dict[str, dict[str, Any]] = {}
                error: Exception | None = None
                try:
                    pages = await asyncio.to_thread(self._find, urls)
                except Exception as err:  # each request fails as its own find_one would
                    error = err
                for url, futures in waiting:
                    for future in futures:
                        if future.done():  # its request was cancelled meanwhile
                            continue
                        if error is None:
                            future.set_result(pages.get(url))
                        else:
                            future.set_exception(error)
        finally:
            self._querying = None

    async def _site_urls(self, url: str) -> frozenset[str] | None:
        """The URLs stored on the site of ``url``; None if there are too many to hold."""
        parts = urlsplit(url)
        site = f"{parts.scheme}://{parts.netloc}"
        if site not in self._sites:
            self._sites[site] = asyncio.ensure_future(asyncio.to_thread(self._find_site, site))
        reading = self._sites[site]
        try:
            # Shielded: a cancelled request must not cancel the reading the others wait for.
            return await asyncio.shield(reading)
        except Exception:
            if self._sites.get(site) is reading:
                del self._sites[site]  # read again when next asked
            raise

    def _find_site(self, site: str) -> frozenset[str] | None:
        # A site's canonical URLs sort between "SITE/" and "SITE0" ("0" follows "/").
        query = {"url": {"$gte": f"{site}/", "$lt": f"{site}0"}}
        found = self.pages().find(query, {"_id": 0, "url": 1}).limit(SITE_URLS_MAX + 1)
        urls = frozenset(page["url"] for page in found)
        return urls if len(urls) <= SITE_URLS_MAX else None

    def _find(self, urls: list[str]) -> dict[str, dict[str, Any]]:
        found = self.pages().find({"url": {"$in": urls}}, self.projection)
        return {page["url"]: page for page in found}
