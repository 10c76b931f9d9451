"""Pirated copies for the findings tests: news works of the corpus, and a page that copies
one of them, stored and scanned by the real matcher."""

from __future__ import annotations

from bson import ObjectId

from tests.corpus import texts
from tracker.scanning.pages import PageInput, scan_page, store_page

ZH = [t for t in texts("zh_news", 40) if len(t) > 550][:6]


def found_on(ctx, url: str, work: int, raw: bytes = b"<html>copy</html>") -> ObjectId:
    """Store and scan a page copying ``ZH[work]``; returns its finding."""
    page_id, _ = store_page(ctx, PageInput(url=url, text="转载 " + ZH[work], raw=raw))
    scan_page(ctx, page_id)
    return ctx.db.findings.find_one({"page_id": page_id})["_id"]
