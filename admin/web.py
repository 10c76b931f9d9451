"""Rendering pages: the Jinja2 environment (autoescaped), template filters, highlighting."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from babel import Locale, UnknownLocaleError
from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import select_autoescape

from tracker.accounts.users import get_user
from tracker.campaigns.outcomes import explain
from tracker.core.times import local, zone
from tracker.findings import (
    DISMISS_REASONS,
    KIND_LABELS,
    LABELS,
    OUTCOME_LABELS,
    STAGE_LABELS,
    STATUSES,
    TRANSITIONS,
)

from .campaigns import progress as run_progress
from .i18n import HTML_LANG, LANGUAGES, current_language, gettext, ngettext, npgettext, pgettext
from .security import app_context, masked_token, pop_flashes, session_of
from .sentences import said

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
#: Highest page number a list takes: beyond it, 422 rather than a skip MongoDB cannot hold.
MAX_PAGE = 1_000_000


#: The zone the reader reads times in (their own, else the installation's), per request.
_zone: ContextVar[str] = ContextVar("copytrack_time_zone", default="UTC")


@contextmanager
def reading_zone(request: Request) -> Iterator[str]:
    """Show times in the zone of the request's reader while rendering for it."""
    auth = getattr(request.state, "auth", None)
    ctx = app_context(request)
    user = get_user(ctx, auth.principal.name) if auth else None
    name = (user or {}).get("time_zone") or ctx.settings.time_zone
    token = _zone.set(name)
    try:
        yield name
    finally:
        _zone.reset(token)


def _datetime(value: datetime | str | None, with_time: bool = True) -> str:
    """A time in the reader's zone with its offset ("2026-12-02 17:30 UTC+8"); a date in
    it alone."""
    if not value:  # None, or a field the document does not have (Jinja's Undefined)
        return "—"
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if not with_time:
        return value.astimezone(zone(_zone.get())).strftime("%Y-%m-%d")
    return local(value, _zone.get())


def _stamp(value: datetime | None) -> str:
    """A time to the second, in UTC, saying so (evidence), with the reader's local time
    beside it when they read another zone."""
    if not value:  # None, or a field the document does not have (Jinja's Undefined)
        return "—"
    utc = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    there = local(value, _zone.get(), "%Y-%m-%d %H:%M:%S")
    return utc if there.endswith(" UTC") else f"{utc} ({there})"


_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def _work_title(title: str) -> str:
    """A work's title as its language writes one: 《红楼梦》, but Bleak House bare."""
    return f"《{title}》" if _CJK.search(title) else title


def _language_name(code: str) -> str:
    """A language code of the library ("zh", "en") named in the reader's language."""
    try:
        names = Locale.parse(current_language()).languages
        return names.get(Locale.parse(code.replace("-", "_")).language, code)
    except (ValueError, UnknownLocaleError):
        return code


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def _query(params: Mapping[str, Any], **changes: Any) -> str:
    """``params`` with ``changes`` applied (None drops a key), as a query string."""
    merged = {**params, **changes}
    return urlencode({k: v for k, v in merged.items() if v not in (None, "")})


templates = Jinja2Templates(directory=HERE / "templates")
# Page text and titles are hostile: autoescape every template, whatever its name.
templates.env.autoescape = select_autoescape(default=True, default_for_string=True)
# Text marked _() speaks the request's language (admin.i18n); newstyle: _() escapes its
# %(name)s values like any other output.
templates.env.add_extension("jinja2.ext.i18n")
# (The extension adds install_gettext_callables; Environment's type does not declare it.)
templates.env.install_gettext_callables(  # type: ignore[attr-defined]
    gettext, ngettext, newstyle=True, pgettext=pgettext, npgettext=npgettext
)
templates.env.filters.update(
    dt=_datetime, stamp=_stamp, pct=_percent, query=_query, work_title=_work_title, said=said
)
templates.env.globals.update(
    STATUSES=STATUSES,
    STATUS_LABELS=LABELS,
    TRANSITIONS=TRANSITIONS,
    DISMISS_REASONS=DISMISS_REASONS,
    NOTICE_STAGE_LABELS=STAGE_LABELS,
    RECHECK_LABELS=OUTCOME_LABELS,
    LANGUAGES=LANGUAGES,
    HTML_LANG=HTML_LANG,
    current_language=current_language,
    language_name=_language_name,
    KIND_LABELS=KIND_LABELS,
    run_progress=run_progress,
    explain=lambda reason: said(explain(reason)),
)


#: What people call the parameters of the pages' addresses and forms.
_FIELD_NAMES = {
    "master_id": "work number",
    "finding_id": "finding number",
    "run_id": "run",
    "page": "page number",
    "min_score": "lowest score",
    "max_score": "highest score",
    "since": "first-seen date",
    "until": "last date",
}
_WHERE = {"path": "in the address", "query": "in the address", "body": "in the form"}


def plain_problem(error: Mapping[str, Any]) -> str:
    """A request validation error (pydantic's) as a sentence for the error page, naming the
    value and what it must be: not "path.master_id: Input should be a valid integer"."""
    loc = [str(part) for part in error.get("loc", ())]
    where = _WHERE.get(loc[0], "in the request") if loc else "in the request"
    name = loc[-1] if len(loc) > 1 else "request"
    label = _FIELD_NAMES.get(name, name.replace("_", " "))
    given = error.get("input")
    value = f" ({str(given)[:80]!r})" if isinstance(given, str | int | float) else ""
    limits = error.get("ctx") or {}
    must = {
        "int_parsing": "must be a whole number",
        "float_parsing": "must be a number",
        "date_parsing": "must be a date like 2026-01-31",
        "date_from_datetime_parsing": "must be a date like 2026-01-31",
        "missing": "is missing",
        "greater_than_equal": f"must be at least {limits.get('ge')}",
        "less_than_equal": f"must be at most {limits.get('le')}",
        "greater_than": f"must be more than {limits.get('gt')}",
        "less_than": f"must be less than {limits.get('lt')}",
        "string_too_long": f"is too long (at most {limits.get('max_length')} characters)",
        "literal_error": f"must be one of {limits.get('expected')}",
    }.get(error.get("type", ""), f"is not valid: {error.get('msg', '')}")
    return f"The {label} {where}{value} {must}; correct it and try again."


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page, with the user, the CSRF token (masked afresh) and pending flash messages in
    its context."""
    auth = getattr(request.state, "auth", None)
    session = session_of(request)
    with reading_zone(request):  # the template is rendered here, in the reader's zone
        return templates.TemplateResponse(
            request,
            name,
            {
                "user": auth.principal if auth else None,
                "csrf_token": masked_token(session.csrf) if session else "",
                "flashes": pop_flashes(request),
                **context,
            },
            status_code=status_code,
        )


def download_headers(filename: str) -> dict[str, str]:
    """Headers that make a browser save the answer as ``filename``."""
    return {"Content-Disposition": f'attachment; filename="{filename}"'}


def download(content: bytes | str, media_type: str, filename: str) -> Response:
    """An answer a browser saves as ``filename`` (a PDF, a CSV, a time-stamp token)."""
    return Response(content, media_type=media_type, headers=download_headers(filename))


def redirect(url: str) -> RedirectResponse:
    """303 See Other: after a POST the browser GETs the next page."""
    return RedirectResponse(url, status_code=303)


def excerpt_bounds(
    length: int, ranges: Iterable[tuple[int, int]], limit: int, margin: int
) -> tuple[int, int]:
    """The part of a text of ``length`` characters to show: all of it up to ``limit``;
    beyond, from ``margin`` characters before the first range to as many after the last
    (a whole-book page is shown around this finding's passages, not in full)."""
    ranges = list(ranges)
    if length <= limit or not ranges:
        return 0, min(length, limit)
    return (
        max(0, min(start for start, _ in ranges) - margin),
        min(length, max(end for _, end in ranges) + margin),
    )


def highlight(text: str, ranges: Iterable[tuple[int, int, int]]) -> list[tuple[str, int | None]]:
    """Cut ``text`` into (piece, passage index or None) for ``(start, end, index)`` ranges.

    Overlapping ranges are clipped so that every character is shown exactly once.
    """
    pieces: list[tuple[str, int | None]] = []
    at = 0
    for start, end, index in sorted(ranges):
        start = max(start, at)
        if end <= start:
            continue
        if start > at:
            pieces.append((text[at:start], None))
        pieces.append((text[start:end], index))
        at = end
    if at < len(text):
        pieces.append((text[at:], None))
    return pieces


class Progress:
    """How far a job off the request is (a report's PDF, a bulk change): ``done`` of
    ``total``, finished when ``finished_at`` is set; 100% only once finished."""

    done: int
    total: int
    finished_at: float | None

    @property
    def percent(self) -> int:
        if self.finished_at is not None:
            return 100
        return min(99, 100 * self.done // max(self.total, 1))
