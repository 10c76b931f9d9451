"""What a crawl run did with each URL that gave no page, and whether the run went well.

A run's counters (``tracker.campaigns.record_progress``) say how many URLs were skipped or
failed for each reason; this module keeps the URLs themselves (MongoDB ``run_problems``:
run, URL, outcome, reason, detail, HTTP status, time), so a reviewer can see *why* a run
fetched little: the host does not resolve, robots.txt refuses, the pages answer 404, they
are over the size cap. At most ``KEPT_PER_CRAWLER`` URLs are kept per crawl process and
run (a run with more only counts the rest), which bounds what a crawl of a broken site
writes.

``run_health`` reads the counters: red when a run failed or fetched nothing, amber when
most of its URLs failed, green otherwise; with a sentence that names the main reason.
"""

from __future__ import annotations

import http
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bson import ObjectId
from pymongo import ASCENDING, ReturnDocument

from ..context import Context

OUTCOMES = ("skipped", "failed")
#: URLs kept per crawl process and run; the counters still count every one.
KEPT_PER_CRAWLER = 10_000

#: What each reason key means, for people: the run page's words.
REASONS: dict[str, str] = {
    "dns": "the host name does not resolve (DNS)",
    "timeout": "too slow: no answer within the download timeout",
    "connection_refused": "the server refused the connection",
    "bad_compression": "the compressed body is corrupt",
    "robots": "refused by the site's robots.txt",
    "private_address": "the host is on a private network (not allowed)",
    "redirect_off_scope": "redirected outside the campaign's domains",
    "too_large": "over the size cap (DOWNLOAD_MAXSIZE, 3 MB)",
    "too_large_decompressed": "over the size cap once decompressed",
    "too_many_redirects": "too many redirects",
    "headers_too_large": "headers over the cap (COPYTRACK_MAX_HEADER_BYTES, COPYTRACK_MAX_HEADERS)",
    "headers_too_slow": "headers not all sent within COPYTRACK_HEADER_SECONDS",
    "redirect_loop": "redirects to itself (or back along its own redirects)",
    "links_over_limit": "links over the per-page limit, not followed",
    "bad_url": "links that are not usable URLs",
    "invalid_sitemap": "a sitemap that cannot be read",
    "fresh": "fetched recently: not fetched again (the campaign's refetch days)",
    "not_html": "not a web page (its media type)",
    "empty": "an empty page",
    "binary": "binary content, not text",
    "undecodable": "text that does not decode",
    "no_main_text": "no article text found on the page",
    "needs_rendering": (
        "no text in the page as served: its scripts may write it (turn on the campaign's "
        "rendering in a browser)"
    ),
    "render_failed": "fetched, but rendering it in the browser failed or ran out of time",
    "too_slow": "extracting its text took too long",
    "ignored": "dropped by the crawler",
    "unreadable_book": "a book download that cannot be read (damaged, or over the size cap)",
    "image_too_large": "an image over COPYTRACK_OCR_MAX_BYTES, not read",
    "image_too_many_pixels": (
        "an image with more pixels than COPYTRACK_OCR_MAX_PIXELS (a decompression bomb?), not read"
    ),
    "image_too_slow": "an image OCR gave up on after COPYTRACK_OCR_CPU_SECONDS",
    "image_unreadable": "an image that cannot be decoded",
    "ocr_failed": "an image Tesseract failed on (is it installed?)",
    "ocr_images_over_limit": "images over the per-page limit (COPYTRACK_OCR_IMAGES), not read",
    "not_stored": (
        "fetched, but could not be stored (a server down or its disk full): the run failed; "
        "run it again once the servers are back"
    ),
}


def explain(reason: str) -> str:
    """A reason key in words ("http_404" → "HTTP 404 Not Found")."""
    if reason.startswith("http_") and reason[5:].isdigit():
        code = int(reason[5:])
        try:
            return f"HTTP {code} {http.HTTPStatus(code).phrase}"
        except ValueError:
            return f"HTTP {code}"
    return REASONS.get(reason, reason.replace("_", " "))


@dataclass(frozen=True)
class Problem:
    """One URL of a run that gave no page (or a page without text)."""

    url: str
    outcome: str  # skipped | failed
    reason: str
    detail: str = ""
    status: int | None = None

    def to_doc(self, run_id: ObjectId, at: datetime) -> dict[str, Any]:
        return {
            "run_id": run_id,
            "url": self.url,
            "outcome": self.outcome,
            "reason": self.reason,
            "detail": self.detail[:500],
            "status": self.status,
            "at": at,
        }


def record_problems(ctx: Context, run_id: ObjectId, problems: Iterable[Problem]) -> int:
    """Store a batch of a run's problems; returns how many were stored."""
    now = datetime.now(UTC)
    docs = [problem.to_doc(run_id, now) for problem in problems]
    if docs:
        ctx.db.run_problems.insert_many(docs, ordered=False)
    return len(docs)


@dataclass(frozen=True)
class ProblemPage:
    """One page of a run's problems, with what the filters can choose from."""

    rows: list[dict[str, Any]]
    total: int
    page: int
    pages: int
    reasons: list[tuple[str, int]]  # every reason of the run's problems, with its count


def problem_page(
    ctx: Context,
    run_id: ObjectId,
    outcome: str | None = None,
    reason: str | None = None,
    page: int = 1,
    per_page: int = 50,
) -> ProblemPage:
    """The run's problems matching the filters, ``per_page`` at a time; a page number
    past the last gives the last page."""
    query: dict[str, Any] = {"run_id": run_id}
    if outcome in OUTCOMES:
        query["outcome"] = outcome
    reasons = Counter(
        doc["reason"] for doc in ctx.db.run_problems.find(query, {"reason": 1, "_id": 0})
    )
    if reason:
        query["reason"] = reason
    total = reasons[reason] if reason else sum(reasons.values())
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    rows = list(
        ctx.db.run_problems.find(query)
        .sort([("outcome", ASCENDING), ("reason", ASCENDING), ("_id", ASCENDING)])
        .skip((page - 1) * per_page)
        .limit(per_page)
    )
    return ProblemPage(rows, total, page, pages, sorted(reasons.items(), key=lambda kv: -kv[1]))


def outcome_counts(run: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """The run's counters by outcome: pages (fetched, changed, unchanged), then skipped and
    failed URLs by reason, most frequent first."""
    out: dict[str, dict[str, int]] = {"pages": dict(run.get("pages") or {})}
    for outcome in OUTCOMES:
        counts = run.get(outcome) or {}
        out[outcome] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return out


@dataclass(frozen=True)
class Health:
    """How a run went: ``ok`` (green), ``warning`` (amber) or ``error`` (red), and why: a
    sentence with ``%(name)s`` places and their values, so the admin can say it in the
    reviewer's language (``message`` is the English)."""

    level: str
    text: str
    values: Mapping[str, str] = field(default_factory=dict)

    @property
    def message(self) -> str:
        return self.text % self.values if self.values else self.text


def _main_reason(counts: Mapping[str, int]) -> dict[str, str]:
    reason, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return {"num": f"{n:,}", "reason": explain(reason)}


def _search_health(search: Mapping[str, Any], fetched: int) -> Health:
    """A discover run that found nothing to crawl, or whose search engine failed."""
    if search.get("error"):
        level = "warning" if fetched else "error"
        return Health(level, "the search engine failed: %(error)s", {"error": search["error"]})
    counts = {name: f"{search.get(name, 0):,}" for name in ("asked", "cached", "known",
                                                           "over_budget")}  # fmt: skip
    if search.get("over_budget") and not search.get("asked"):
        return Health(
            "warning",
            "nothing searched: today's query budget is spent (%(over_budget)s queries wait "
            "for tomorrow)",
            counts,
        )
    return Health(
        "ok",
        "no new site found: %(asked)s queries asked, %(cached)s answered from the cache, "
        "%(known)s results on sites already crawled or licensed",
        counts,
    )


def expect_failures(
    ctx: Context, run_id: ObjectId, counts: Mapping[str, int], why: str
) -> dict[str, Any] | None:
    """Record that ``counts`` of the run's failures (by reason) were expected, and ``why``
    (a sentence): `run_health` counts them apart, not as the run's failures. Returns the
    run as recorded (None for an unknown run)."""
    expected = {"counts": {reason: n for reason, n in counts.items() if n}, "why": why}
    return ctx.db.runs.find_one_and_update(
        {"_id": run_id},
        {"$set": {"expected_failures": expected}},
        return_document=ReturnDocument.AFTER,
    )


def _unexpected(run: Mapping[str, Any]) -> tuple[dict[str, int], int, str]:
    """The run's failures by reason less those it expected; how many it expected, and why."""
    expected = run.get("expected_failures") or {}
    counts = expected.get("counts") or {}
    failed, n_expected = {}, 0
    for reason, n in (run.get("failed") or {}).items():
        known = min(n, counts.get(reason, 0))
        n_expected += known
        if n > known:
            failed[reason] = n - known
    return failed, n_expected, expected.get("why") or ""


def run_health(run: Mapping[str, Any]) -> Health:
    """Red: the run failed, or it is over and fetched nothing; amber: someone stopped it,
    or most of its URLs failed; green otherwise (a run still going is judged on what it
    did so far)."""
    fetched = (run.get("pages") or {}).get("fetched", 0)
    failed, n_expected, expected_why = _unexpected(run)
    skipped = run.get("skipped") or {}
    n_failed = sum(failed.values())
    counts = {"fetched": f"{fetched:,}", "failed": f"{n_failed:,}"}
    if run.get("state") == "failed":
        return Health("error", run.get("error") or "the run failed")
    if run.get("state") == "cancelled":
        stopped = run.get("cancelled") or {}
        at = stopped.get("at")
        return Health(
            "warning",
            "stopped by %(by)s at %(at)s; %(fetched)s fetched",
            {**counts, "by": stopped.get("by") or "?",
             "at": at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if at else "?"},
        )  # fmt: skip
    done = run.get("state") in ("scanning", "finished")
    search = run.get("discovery")
    if search is not None and (search.get("error") or (done and not search["seeds"])):
        return _search_health(search, fetched)
    if done and fetched == 0:
        why = failed or skipped
        if why:
            return Health("error", "fetched nothing: %(num)s × %(reason)s", _main_reason(why))
        return Health("error", "fetched nothing: the seeds gave no page and no error")
    if n_failed > fetched:
        return Health(
            "warning",
            "mostly failed: %(failed)s URLs failed, %(fetched)s fetched; main reason "
            "%(num)s × %(reason)s",
            {**counts, **_main_reason(failed)},
        )
    if n_expected:
        counts |= {"expected": f"{n_expected:,}", "why": expected_why}
        if n_failed:
            return Health(
                "ok", "%(fetched)s fetched; %(failed)s failed, and %(expected)s as expected "
                "(%(why)s)", counts,
            )  # fmt: skip
        return Health(
            "ok", "%(fetched)s fetched; %(expected)s failed as expected (%(why)s)", counts
        )
    if n_failed:
        return Health("ok", "%(fetched)s fetched; %(failed)s failed", counts)
    return Health("ok", "%(fetched)s fetched", counts)
