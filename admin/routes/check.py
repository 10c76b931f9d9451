"""Check a text or a URL against the library: Copyscape's core interaction, answered with
the evidence a finding shows (which works, how much of each, the passages side by side).
Nothing is stored: a check is a question, not a finding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from tracker.campaigns.outcomes import REASONS, explain
from tracker.context import Context
from tracker.findings import Passage, passages
from tracker.matching.matcher import Match, match_text
from tracker.scanning.rechecks import PageFetcher

from ..i18n import _
from ..security import Viewer, app_context
from ..sentences import said
from ..web import render

router = APIRouter(include_in_schema=False)
PASSAGE_CHARS = 240
MAX_CHECK_CHARS = 1_000_000  # a whole book; more is a job for `copytrack check`
MATCHES_SHOWN = 20


@dataclass(frozen=True)
class CheckedWork:
    match: Match
    passages: list[Passage]


def _checked(ctx: Context, text: str) -> list[CheckedWork]:
    matches = match_text(ctx, text)[:MATCHES_SHOWN]
    masters = {
        m["_id"]: m.get("text", "")
        for m in ctx.db.masters.find({"_id": {"$in": [x.master.id for x in matches]}})
    }
    return [
        CheckedWork(
            match,
            passages(
                {"spans": [list(span) for span in match.spans]},
                masters.get(match.master.id, ""),
                text,
                width=PASSAGE_CHARS,
            ),
        )
        for match in matches
    ]


def _skipped(reason: str) -> str:
    """Why a fetched page has no text to check: the crawl's reason key in words (its
    detail, the page's own, after it)."""
    key, _sep, detail = reason.partition(": ")
    if key not in REASONS:
        return said(reason)
    return f"{said(explain(key))} ({said(detail)})" if detail else said(explain(key))


@dataclass(frozen=True)
class Check:
    """What one input gave: the page at ``url``, or (``url`` empty) the pasted text."""

    url: str
    chars: int = 0
    results: list[CheckedWork] | None = None
    problem: str | None = None


def _too_long(text: str) -> str | None:
    if len(text) <= MAX_CHECK_CHARS:
        return None
    return _(
        "the text has %(chars)s characters; the admin checks up to %(most)s: check longer "
        "ones with `copytrack check FILE`"
    ) % {"chars": f"{len(text):,}", "most": f"{MAX_CHECK_CHARS:,}"}


async def _check_url(ctx: Context, fetch: PageFetcher | None, url: str) -> Check:
    if fetch is None:
        return Check(url, problem=_("this admin cannot fetch pages: paste the page's text instead"))
    try:
        page = await run_in_threadpool(fetch, url)
    except ValueError as err:
        return Check(url, problem=str(err))
    if page.skip_reason:
        return Check(url, problem=f"{url}: {_skipped(page.skip_reason)}")
    return await _check_text(ctx, page.text, url)


async def _check_text(ctx: Context, text: str, url: str = "") -> Check:
    if problem := _too_long(text):
        return Check(url, len(text), problem=problem)
    return Check(url, len(text), await run_in_threadpool(_checked, ctx, text))


@router.get("/check")
def check_form(request: Request, user: Viewer) -> HTMLResponse:
    return render(request, "check.html", text="", url="", checks=[], problem=None)


@router.post("/check")
async def check_submitted(
    request: Request,
    user: Viewer,
    text: Annotated[str, Form()] = "",
    url: Annotated[str, Form(max_length=2000)] = "",
) -> HTMLResponse:
    """Checks the page at the URL and the pasted text, each reported under its own input
    (both when both are given); the form keeps what was submitted."""
    ctx = app_context(request)
    fetch: PageFetcher | None = request.app.state.fetch_page
    checks = []
    if url.strip():
        checks.append(await _check_url(ctx, fetch, url.strip()))
    if text.strip():
        checks.append(await _check_text(ctx, text.strip()))
    problem = None if checks else _("give a text, or the URL of a page")
    failed = not checks or all(check.problem for check in checks)
    return render(
        request,
        "check.html",
        status_code=400 if failed else 200,
        text=text,
        url=url.strip(),
        checks=checks,
        problem=problem,
    )
