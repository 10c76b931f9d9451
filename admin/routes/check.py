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
from tracker.matcher import Match, match_text
from tracker.rechecks import PageFetcher

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


@router.get("/check")
def check_form(request: Request, user: Viewer) -> HTMLResponse:
    return render(request, "check.html", text="", url="", results=None, problem=None)


@router.post("/check")
async def check_submitted(
    request: Request,
    user: Viewer,
    text: Annotated[str, Form()] = "",
    url: Annotated[str, Form(max_length=2000)] = "",
) -> HTMLResponse:
    ctx = app_context(request)
    fetch: PageFetcher | None = request.app.state.fetch_page
    text, url = text.strip(), url.strip()
    problem = None
    if url and not text:
        if fetch is None:
            problem = _("this admin cannot fetch pages: paste the page's text instead")
        else:
            try:
                page = await run_in_threadpool(fetch, url)
            except ValueError as err:
                problem = str(err)
            else:
                text = page.text
                problem = f"{url}: {_skipped(page.skip_reason)}" if page.skip_reason else None
    if not problem and not text:
        problem = _("give a text, or the URL of a page")
    if not problem and len(text) > MAX_CHECK_CHARS:
        problem = _(
            "the text has %(chars)s characters; the admin checks up to %(most)s: check longer "
            "ones with `copytrack check FILE`"
        ) % {"chars": f"{len(text):,}", "most": f"{MAX_CHECK_CHARS:,}"}
    results = None if problem else await run_in_threadpool(_checked, ctx, text)
    return render(
        request,
        "check.html",
        status_code=400 if problem else 200,
        text=text if not url else "",
        url=url,
        chars=len(text),
        results=results,
        problem=problem,
    )
