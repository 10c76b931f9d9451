"""Fetched pages (the evidence) and scanning them against the library."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import update_found
from ..findings import RecordResult, record_findings, suppress_licensed
from ..findings.captures import (
    FILE_FIELDS,
    CapturedImage,
    drop_replaced,
    page_capture,
    page_text,
    restore_images,
    stored_images,
    stored_parts,
)
from ..masters.generation import IndexNotReady, current, require
from ..matching.index_audit import audit_sample, audit_works
from ..matching.matcher import match_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PageInput:
    """A page as the crawler hands it over: where it came from, its bytes and its text."""

    url: str
    text: str
    raw: bytes = b""
    final_url: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    title: str | None = None
    author: str | None = None
    published: str | None = None
    encoding: str | None = None
    extractor: str | None = None
    campaign: str | None = None
    run_id: Any = None
    skip_reason: str | None = None  # why a page has no text to scan (binary, gone, …)
    next_url: str | None = None  # the page continuing it ("下一页"), on the same site
    parts: tuple[str, ...] = ()  # the pages a joined chapter was made of (tracker.scanning.chains)
    rendered: bool = False  # the capture is the page as a browser rendered it (its scripts run)
    # A page of a chapter cut into several: its copies are found in the chapter joined from
    # them (tracker.scanning.chains), not on it alone (where each would be a
    # quotation-sized excerpt).
    chained: bool = False
    # A listing page (headlines, a tag or search page: extractor.Extracted.listing): its
    # quotation-sized matches are headlines and first lines, links to the works.
    listing: bool = False
    # The address the page was fetched from: whose network hosts it (takedown notices).
    ip: str | None = None
    # The URLs that redirected to it, in order (the domains an operator sends on).
    redirected_from: tuple[str, ...] = ()
    # The images of its article whose text was read by OCR (the campaign's ``ocr``): the
    # text holds theirs, and they are kept with the capture.
    images: tuple[CapturedImage, ...] = ()


@dataclass(frozen=True)
class ScanResult:
    page_id: ObjectId
    scanned: bool  # False when the text was already scanned with these parameters
    matches: int
    record: RecordResult | None = None


def store_page(ctx: Context, page: PageInput) -> tuple[ObjectId, bool]:
    """Store or refresh a page keyed by URL; returns (id, whether its text is to be scanned:
    it changed, or it was never scanned).

    The raw bytes are kept zlib-compressed with their SHA-256, so the evidence can be
    shown and verified later (a whole book's parts in GridFS: tracker.findings.captures). A
    ``skip_reason`` is stored with the page, or removed when it has none. A read and a
    write in MongoDB (and GridFS for a big page).
    """
    now = datetime.now(UTC)
    content_sha = hashlib.sha256(page.text.encode("utf-8", "surrogatepass")).hexdigest()
    raw_sha = hashlib.sha256(page.raw).hexdigest()
    fields = {
        "final_url": page.final_url or page.url,
        "status": page.status,
        "headers": page.headers,
        "title": page.title,
        "author": page.author,
        "published": page.published,
        "encoding": page.encoding,
        "extractor": page.extractor,
        "content_sha256": content_sha,
        "raw_sha256": raw_sha,
        "raw_bytes": len(page.raw),
        "fetched_at": now,
        "campaign": page.campaign,
        "run_id": page.run_id,
        **stored_parts(ctx, page.raw, page.text, raw_sha),
    }
    if page.ip:  # kept from an earlier capture when a fetch does not say
        fields["ip"] = page.ip
    images = stored_images(ctx, page.images)
    # Set only when there is one, or else taken away: the indexes on them stay small.
    unset: dict[str, str] = {}
    sparse = (("next_url", page.next_url), ("parts", list(page.parts)),
              ("skip_reason", page.skip_reason), ("rendered", page.rendered),
              ("chained", page.chained), ("listing", page.listing),
              ("redirected_from", list(page.redirected_from)),
              ("ocr_images", images))  # fmt: skip
    for name, value in sparse:
        if value:
            fields[name] = value
        else:
            unset[name] = ""
    # Due for a scan (counted with the run storing it, `pending_scans`): a new text, or
    # one stored before and not scanned since (its run died first).
    due = {"scan_due": page.run_id or True}
    # A new capture is due for a trusted time-stamp (a worker asks the authority: the crawl
    # never waits for it); an earlier capture's token is not its own.
    stamp = {"timestamp_due": now} if ctx.settings.tsa_url and page.raw else {}
    new_capture = {"timestamp": "", "timestamp_error": ""}
    if not stamp:
        new_capture["timestamp_due"] = ""

    def refresh(before: Mapping[str, Any]) -> dict[str, Any]:
        to_scan = before.get("content_sha256") != content_sha or "scan_due" in before
        if before.get("raw_sha256") == raw_sha:
            return {"$set": {**fields, **(due if to_scan else {})}, "$unset": unset}
        return {"$set": {**fields, **(due if to_scan else {}), **stamp},
                "$unset": {**unset, **new_capture}}  # fmt: skip

    before = update_found(
        ctx.db.pages,
        {"url": page.url},
        refresh,
        projection={
            "content_sha256": 1,
            "raw_sha256": 1,
            "scan_due": 1,
            **dict.fromkeys(FILE_FIELDS, 1),
            "ocr_images": 1,
        },
    )
    if before is None:
        # A new page (two responses racing to insert one URL: DuplicateKeyError, and the
        # caller stores it again, as an update).
        new_id = ctx.db.pages.insert_one(
            {"_id": ObjectId(), "url": page.url, "first_fetched_at": now, **fields, **due, **stamp}
        ).inserted_id
        restore_images(ctx, images, page.images)
        return new_id, True
    restore_images(ctx, images, page.images)
    drop_replaced(ctx, before, fields)
    return before["_id"], before.get("content_sha256") != content_sha or "scan_due" in before


def scan_mark(ctx: Context) -> list[str]:
    """What a scan is done with: the fingerprint parameters and the index generation."""
    return [ctx.params.version, current(ctx)]


def needs_scan(page: Mapping[str, Any], mark: Sequence[str]) -> bool:
    """Whether a page's current text was never scanned with this `scan_mark`."""
    return page.get("scanned_as") != [page.get("content_sha256"), *mark]


def unscanned_pages(ctx: Context, campaign: str | None = None) -> list[ObjectId]:
    """Pages (of the campaign) whose current text was not scanned with ctx's parameters
    against the library's index generation: their scan was lost (a Redis crash, a dead
    worker, an index that was not the library's) or the parameters changed."""
    query = {} if campaign is None else {"campaign": campaign}
    pages = ctx.db.pages.find(query, {"content_sha256": 1, "scanned_as": 1})
    mark = scan_mark(ctx)
    return [page["_id"] for page in pages if needs_scan(page, mark)]


def overdue_scans(ctx: Context, older_than: timedelta, limit: int = 1000) -> list[ObjectId]:
    """Pages due for a scan (``scan_due``) since before ``older_than`` ago, oldest first, at
    most ``limit``; none while the index is not the library's (scans would be refused, and
    `copytrack rescan` queues them after a rebuild).

    Every such page had its scan queued when it was stored: one overdue that is neither
    waiting in the queue nor delivered to a worker lost its scan (`tracker.tasks`).
    """
    try:
        require(ctx)
    except IndexNotReady:
        return []
    due = ctx.db.pages.find(_overdue(older_than), {"_id": 1})
    return [page["_id"] for page in due.sort("fetched_at", 1).limit(limit)]


def count_overdue_scans(ctx: Context, older_than: timedelta) -> int:
    """How many pages have been due for a scan since before ``older_than`` ago."""
    return ctx.db.pages.count_documents(_overdue(older_than))


def _overdue(older_than: timedelta) -> dict[str, Any]:
    return {"scan_due": {"$exists": True}, "fetched_at": {"$lt": datetime.now(UTC) - older_than}}


def header(headers: Mapping[str, str], name: str) -> str | None:
    """A stored page's response header ``name`` (lower case), whatever its case there."""
    return next((v for k, v in headers.items() if k.lower() == name), None)


def text_date(ctx: Context, page: Mapping[str, Any]) -> str | None:
    """The date a stored HTML page's text gives (its markup gave none when it was crawled):
    searched only for the pages with findings, where reviewers read it, as it costs a tenth
    of a page's extraction."""
    # Imported here: extraction's libraries take a tenth of a second to import, which every
    # command importing this module would pay for what only pages with new findings need.
    from extractor import UnusableContent, decode_html, published_date

    content_type = header(page.get("headers") or {}, "content-type")
    if not (content_type or "text/html").lower().startswith(("text/html", "application/xhtml")):
        return None
    raw = page_capture(ctx, page)
    try:
        decoded = decode_html(raw or b"", content_type)
    except UnusableContent:
        return None
    return published_date(decoded.text, page.get("final_url") or page.get("url"))


def record_scan_failure(ctx: Context, page_id: ObjectId, reason: str) -> None:
    """Record on the page why its scan failed (a time limit), and that it is no longer due:
    queued again, it would fail again. It stays unscanned: `copytrack rescan` scans it."""
    ctx.db.pages.update_one(
        {"_id": page_id},
        {"$set": {"scan_failed": {"at": datetime.now(UTC), "reason": reason}},
         "$unset": {"scan_due": ""}},
    )  # fmt: skip


def scan_page(ctx: Context, page_id: ObjectId, force: bool = False) -> ScanResult:
    """Match a stored page against the library and record its findings (idempotent).

    Raises `tracker.masters.generation.IndexNotReady`, before reading anything, when the index is
    not the library's (its counts, and now and then a sample of works looked up:
    `tracker.matching.index_audit`), and before closing a finding whose work's postings are not all
    in the index: a scan against it would close real findings.
    """
    mark = [ctx.params.version, require(ctx)]
    audit_sample(ctx)
    page = ctx.db.pages.find_one({"_id": page_id})
    if page is None:
        raise LookupError(f"page {page_id} not found: it was deleted before the scan ran")
    if not force and not needs_scan(page, mark):
        if "scan_due" in page:  # stored again with the text it was scanned with
            ctx.db.pages.update_one(
                {"_id": page_id, "content_sha256": page.get("content_sha256")},
                {"$unset": {"scan_due": ""}},
            )
        return ScanResult(page_id, scanned=False, matches=page.get("matches", 0))
    # A page of a chain is matched as part of its joined chapter only.
    matches = [] if page.get("chained") else match_text(ctx, page_text(ctx, page))
    if page.get("listing"):  # a copy on it is kept, its headlines are not findings
        matches = [match for match in matches if not match.quotation]
    record = record_findings(
        ctx, page, matches, run_id=page.get("run_id"), keep_open=lambda ids: audit_works(ctx, ids)
    )
    if matches:  # a syndication partner's copy is licensed, not new
        suppress_licensed(ctx, page_id)
    scanned = {
        "scanned_as": [page.get("content_sha256"), *mark],
        "scanned_at": datetime.now(UTC),
        "matches": len(matches),
    }
    if record.new and page.get("published") is None:
        scanned["published"] = text_date(ctx, page)
    ctx.db.pages.update_one(
        # Not if its text changed meanwhile: that one is due, and will be scanned.
        {"_id": page_id, "content_sha256": page.get("content_sha256")},
        {"$set": scanned, "$unset": {"scan_due": "", "scan_failed": ""}},
    )
    log.info(
        "page scanned: %d matching works",
        len(matches),
        extra={
            "page_id": str(page_id),
            "url": page.get("url"),
            "campaign": page.get("campaign"),
            "run_id": str(page["run_id"]) if page.get("run_id") else None,
            "findings": len(matches),
        },
    )
    return ScanResult(page_id, scanned=True, matches=len(matches), record=record)
