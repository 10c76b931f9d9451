"""Findings: the filtered list with bulk changes, the evidence page, notices, raw snapshots."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from bson import ObjectId
from fastapi import APIRouter, Form, HTTPException, Path, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response
from starlette.concurrency import run_in_threadpool

from extractor.decoding import UnusableContent, decode_html
from tracker.context import Context
from tracker.core.times import now
from tracker.enforcement.timeline import finding_timeline
from tracker.findings import (
    DISMISS_REASONS,
    LABELS,
    NOTICE_DEADLINE_DAYS,
    NOTICE_LANGUAGES,
    OPEN,
    BulkResult,
    FindingNotFound,
    NoSender,
    WorkflowError,
    build_notice,
    bulk_set_status,
    check_change,
    find_findings,
    hidden_quotations,
    matching_ids,
    neighbours,
    notices_of,
    parse_filter,
    parse_object_id,
    passages,
    record_notice,
    set_status,
    working_days_after,
)
from tracker.findings.captures import page_capture, page_image
from tracker.findings.captures import page_text as stored_text
from tracker.masters.library import master_or_archived
from tracker.scanning.rechecks import PageFetcher, recheck_page

from ..evidence import PART_BYTES, capture_part, marked_copy, part_count, part_holding
from ..i18n import N_, _
from ..security import (
    EVIDENCE_CSP,
    Reviewer,
    Viewer,
    app_catalogue,
    app_context,
    flash,
    safe_next,
)
from ..web import MAX_PAGE, excerpt_bounds, highlight, redirect, render

router = APIRouter(include_in_schema=False)
PASSAGE_CHARS = 240  # the table summarizes; the side-by-side view shows everything
# A page longer than this (a whole-book TXT) is shown around the finding's passages only.
PAGE_CHARS_SHOWN = 100_000
# Other works the same page copies, listed on a finding (the rest are one link away).
SIBLINGS_SHOWN = 20
SIBLING_FIELDS = {"master_title": 1, "master_external_id": 1, "score": 1, "status": 1}
_CHARSET = re.compile(r"^[A-Za-z0-9_.:-]{1,40}$")
#: Status filters offered in the list, in the order a reviewer uses them.
STATUS_CHOICES = (("", N_("Any status")), (",".join(OPEN), N_("Open")), *LABELS.items())
SORT_CHOICES = (
    ("-last_seen", N_("Last seen")),
    ("-first_seen", N_("First seen")),
    ("-score", N_("Score")),
    ("-master_coverage", N_("Work coverage")),
    ("-copied_chars", N_("Most copied")),
    ("-hits", N_("Hits")),
    ("domain", N_("Domain")),
)
#: Sizes offered in the list (tracker.findings.SIZES): the queue holds copies only.
SIZE_CHOICES = (
    ("copies", N_("Copies")),
    ("quotations", N_("Quotation-sized only")),
    ("any", N_("Copies and quotations")),
)


def _oid(value: str) -> ObjectId:
    try:
        return parse_object_id(value)
    except ValueError:
        raise HTTPException(404, _("no such finding")) from None


def _finding(ctx: Context, finding_id: str) -> dict[str, Any]:
    finding = ctx.db.findings.find_one({"_id": _oid(finding_id)})
    if finding is None:
        raise HTTPException(404, _("no such finding"))
    return finding


@router.get("/findings")
def findings_list(
    request: Request,
    user: Viewer,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    per_page: Annotated[int, Query(ge=10, le=200)] = 50,
) -> HTMLResponse:
    ctx = app_context(request)
    flt = parse_filter(request.query_params)
    catalogue = app_catalogue(request)
    result = find_findings(ctx, flt, page, per_page, catalogue)
    if result.page > result.pages:  # a page past the last (an old link): show the last
        result = find_findings(ctx, flt, result.pages, per_page, catalogue)
    return render(
        request,
        "findings.html",
        result=result,
        flt=flt,
        params=flt.as_params(),
        status_value=",".join(flt.status),
        status_choices=STATUS_CHOICES,
        sort_choices=SORT_CHOICES,
        size_choices=SIZE_CHOICES,
        hidden_quotations=hidden_quotations(ctx, flt, catalogue),
        campaigns=sorted(ctx.db.campaigns.distinct("name")),
        back=request.url.path + (f"?{request.url.query}" if request.url.query else ""),
    )


@router.post("/findings/bulk")
def findings_bulk(
    request: Request,
    user: Reviewer,
    status: Annotated[str, Form()],
    ids: Annotated[list[str], Form(default_factory=list)],
    note: Annotated[str, Form(max_length=2000)] = "",
    reason: Annotated[str, Form(max_length=40)] = "",
    back: Annotated[str, Form()] = "/findings",
) -> Response:
    if not ids:
        flash(request, _("Select findings first (tick the boxes on the left)."), "error")
        return redirect(safe_next(back))
    try:
        result = bulk_set_status(
            app_context(request),
            [_oid(i) for i in ids],
            status,
            user.name,
            note or None,
            (reason or None) if status == "dismissed" else None,
        )
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(safe_next(back))
    _flash_bulk(request, result, status)
    return redirect(safe_next(back))


def _flash_bulk(request: Request, result: BulkResult, status: str) -> None:
    label = _(LABELS.get(status, status)).lower()
    message = _("%(num)s finding(s) marked %(status)s.") % {"num": result.changed, "status": label}
    if result.refused:
        message += " " + _("%(num)s could not change (their status does not allow it).") % {
            "num": result.refused
        }
    flash(request, message, "ok" if not result.refused else "warn")


@router.post("/findings/bulk/all")
def findings_bulk_all(
    request: Request,
    user: Reviewer,
    status: Annotated[str, Form()],
    list_filter: Annotated[str, Form(alias="filter", max_length=4000)] = "",
    note: Annotated[str, Form(max_length=2000)] = "",
    reason: Annotated[str, Form(max_length=40)] = "",
    back: Annotated[str, Form()] = "/findings",
    count: Annotated[int | None, Form(ge=0)] = None,
    confirm: Annotated[bool, Form()] = False,
) -> Response:
    """Change every finding the list's filter matches, not only the ticked ones: the first
    post shows how many and asks; the second (``confirm``, with the ``count`` shown)
    changes them. A count that moved in between is shown again, to be confirmed anew."""
    flt = parse_filter(dict(parse_qsl(list_filter)))
    reason = (reason or "") if status == "dismissed" else ""
    try:
        check_change(status, reason or None)
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(safe_next(back))
    ctx = app_context(request)
    ids = matching_ids(ctx, flt, app_catalogue(request))
    if not ids:
        flash(request, _("No findings match these filters."), "error")
        return redirect(safe_next(back))
    if not confirm or count != len(ids):
        params = flt.as_params()
        return render(
            request,
            "findings_bulk_all.html",
            total=len(ids),
            moved=confirm and count != len(ids),
            status=status,
            status_label=_(LABELS.get(status, status)).lower(),
            reason=reason,
            reason_label=_(DISMISS_REASONS[reason]) if reason else "",
            note=note,
            params=params,
            list_filter=urlencode(params),
            back=safe_next(back),
        )
    jobs = request.app.state.bulk_jobs
    if len(ids) > jobs.in_request:  # minutes of writes: off the request, with progress
        job = jobs.start(ids, status, user.name, note or None, reason or None, safe_next(back))
        return redirect(f"/findings/bulk/jobs/{job.id}")
    result = bulk_set_status(ctx, ids, status, user.name, note or None, reason or None)
    _flash_bulk(request, result, status)
    return redirect(safe_next(back))


@router.get("/findings/bulk/jobs/{job_id}")
def findings_bulk_job(request: Request, user: Reviewer, job_id: str) -> HTMLResponse:
    """A change of very many findings running off the request: how far it is."""
    job = request.app.state.bulk_jobs.get(job_id)
    if job is None:
        raise HTTPException(404, _("no such change (finished changes are kept an hour)"))
    label = _(LABELS.get(job.status, job.status)).lower()
    return render(request, "bulk_job.html", job=job, status_label=label)


@router.get("/findings/{finding_id}")
def finding_detail(request: Request, user: Viewer, finding_id: str) -> HTMLResponse:
    ctx = app_context(request)
    finding = _finding(ctx, finding_id)
    # The list it was opened from (its filter is the query string): previous and next.
    flt = parse_filter(request.query_params)
    # A work deleted since: the finding is a record, shown with the work as archived.
    master = master_or_archived(ctx, finding["master_id"])
    page = ctx.db.pages.find_one({"_id": finding["page_id"]}, {"raw_zlib": 0}) or {}
    master_text, page_text = master.get("text", ""), stored_text(ctx, page)
    found = passages(finding, master_text, page_text, width=PASSAGE_CHARS)
    start, end = excerpt_bounds(
        len(page_text), [(p.page_start, p.page_end) for p in found], PAGE_CHARS_SHOWN, 2000
    )
    others = {"page_id": finding["page_id"], "_id": {"$ne": finding["_id"]}}
    return render(
        request,
        "finding.html",
        finding=finding,
        master=master,
        page=page,
        passages=found,
        master_pieces=highlight(
            master_text, [(p.master_start, p.master_end, p.index) for p in found]
        ),
        page_pieces=highlight(
            page_text[start:end],
            [(p.page_start - start, p.page_end - start, p.index) for p in found],
        ),
        page_cut=(start, len(page_text) - end),
        capture_parts=part_count(page.get("raw_bytes") or 0),
        part_kb=PART_BYTES // 1024,
        siblings=list(
            ctx.db.findings.find(others, SIBLING_FIELDS)
            .sort([("score", -1), ("_id", 1)])
            .limit(SIBLINGS_SHOWN)
        ),
        sibling_count=ctx.db.findings.count_documents(others),
        notices=notices_of(ctx, finding["_id"]),
        timeline=finding_timeline(ctx, finding["_id"]),
        languages=NOTICE_LANGUAGES,
        near=neighbours(ctx, flt, finding["_id"], app_catalogue(request)),
        list_params=flt.as_params(),
        now=now(),
        can_recheck=request.app.state.fetch_page is not None,
    )


@router.post("/findings/{finding_id}/status")
def finding_status(
    request: Request,
    user: Reviewer,
    finding_id: str,
    status: Annotated[str, Form()],
    note: Annotated[str, Form(max_length=2000)] = "",
    after: Annotated[str, Form(max_length=2000)] = "",
    reason: Annotated[str, Form(max_length=40)] = "",
) -> Response:
    """Change a finding's status; then open ``after`` (the next finding of the list the
    reviewer is going through), or this finding again."""
    try:
        set_status(
            app_context(request),
            _oid(finding_id),
            status,
            user.name,
            note or None,
            (reason or None) if status == "dismissed" else None,
        )
    except FindingNotFound:
        raise HTTPException(404, _("no such finding")) from None
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(f"/findings/{finding_id}")
    flash(request, _("Finding marked %(status)s.") % {"status": _(LABELS[status]).lower()})
    return redirect(safe_next(after) if after else f"/findings/{finding_id}")


@router.get("/findings/{finding_id}/notice")
def notice_form(request: Request, user: Reviewer, finding_id: str, lang: str = "zh") -> Response:
    try:
        notice = build_notice(app_context(request), _oid(finding_id), lang)
    except FindingNotFound:
        raise HTTPException(404, _("no such finding")) from None
    except NoSender as err:
        flash(request, str(err), "error")
        return redirect("/settings" if user.can("admin") else f"/findings/{finding_id}")
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(f"/findings/{finding_id}")
    return render(
        request,
        "notice.html",
        notice=notice,
        finding=_finding(app_context(request), finding_id),
        languages=NOTICE_LANGUAGES,
        today=now().date().isoformat(),
        deadline=working_days_after(now(), NOTICE_DEADLINE_DAYS).date().isoformat(),
        deadline_days=NOTICE_DEADLINE_DAYS,
    )


@router.post("/findings/{finding_id}/notice")
def notice_sent(
    request: Request,
    user: Reviewer,
    finding_id: str,
    lang: Annotated[str, Form()],
    subject: Annotated[str, Form(max_length=500)],
    body: Annotated[str, Form(max_length=100_000)],
    recipient: Annotated[str, Form(max_length=500)],
    deadline: Annotated[date | None, Form()] = None,
) -> Response:
    try:
        record_notice(
            app_context(request),
            _oid(finding_id),
            lang=lang,
            subject=subject,
            body=body,
            recipient=recipient,
            by=user.name,
            # The end of the day the reviewer chose, in UTC.
            deadline=datetime.combine(deadline, time.max, tzinfo=UTC) if deadline else None,
        )
    except FindingNotFound:
        raise HTTPException(404, _("no such finding")) from None
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(f"/findings/{finding_id}/notice?lang={lang}")
    flash(
        request,
        _("Notice to %(recipient)s recorded; the finding is now 'notice sent'.")
        % {"recipient": recipient},
    )
    return redirect(f"/findings/{finding_id}")


@router.post("/findings/{finding_id}/recheck")
async def finding_recheck(request: Request, user: Reviewer, finding_id: str) -> Response:
    """Fetch the finding's page again now and record whether it still copies the work."""
    ctx = app_context(request)
    finding = _finding(ctx, finding_id)
    fetch: PageFetcher | None = request.app.state.fetch_page
    if fetch is None:
        flash(request, _("This admin cannot fetch pages; `copytrack recheck` can."), "error")
        return redirect(f"/findings/{finding_id}")
    check = await run_in_threadpool(recheck_page, ctx, finding["page_id"], fetch, user.name)
    messages = {
        "still_there": (_("The page still copies the work."), "warn"),
        "removed": (_("The copy is gone: the finding is now 'removed'."), "ok"),
        "unreachable": (
            _("The page could not be fetched: %(reason)s") % {"reason": check.detail},
            "error",
        ),
    }
    message, level = messages[check.outcome]
    flash(
        request, _("Re-checked %(url)s: %(result)s") % {"url": check.url, "result": message}, level
    )
    return redirect(f"/findings/{finding_id}#notices")


@router.get("/notices/{notice_id}")
def notice_text(request: Request, user: Viewer, notice_id: str) -> PlainTextResponse:
    notice = app_context(request).db.notices.find_one({"_id": _oid(notice_id)})
    if notice is None:
        raise HTTPException(404, _("no such notice"))
    return PlainTextResponse(
        f"Subject: {notice['subject']}\nTo: {notice['recipient']}\n\n{notice['body']}\n",
        headers={"X-Content-SHA256": notice["sha256"]},
    )


@router.get("/pages/{page_id}/raw")
def page_raw(
    request: Request,
    user: Viewer,
    page_id: str,
    download: bool = False,
    mark: str = "",
    part: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
) -> Response:
    """The captured page exactly as fetched, as text (its source: rendered, its frames would
    reach the pirate's server) or a download; with ``mark`` (a finding of the page), an
    inert copy with that finding's passages marked, for the sandboxed evidence frame: of a
    large capture, one ``part`` (by default the one with the first passage)."""
    ctx = app_context(request)
    page = ctx.db.pages.find_one(
        {"_id": _oid(page_id)},
        {"raw_zlib": 1, "raw_file": 1, "encoding": 1, "raw_sha256": 1, "text": 1, "text_file": 1},
    )
    raw = None if page is None else page_capture(ctx, page)
    if page is None or raw is None:
        raise HTTPException(404, _("no snapshot of this page"))
    charset = page.get("encoding") or ""
    charset = f"; charset={charset}" if _CHARSET.match(charset) else ""
    media_type = ("text/html" if download else "text/plain") + charset
    name = page["raw_sha256"]
    if mark and not download:
        finding = _finding(ctx, mark)
        if finding["page_id"] != page["_id"]:
            raise HTTPException(404, _("this finding is of another page"))
        raw = _marked_copy(ctx, finding, page, raw, charset, part)
        media_type, name = "text/html; charset=utf-8", f"{name}-marked"
    disposition = "attachment" if download else "inline"
    return _evidence_file(raw, media_type, f'{disposition}; filename="{name}.html"',
                          {"X-Frame-Options": "SAMEORIGIN"})  # fmt: skip


def _evidence_file(
    body: bytes, media_type: str, disposition: str, headers: dict[str, str]
) -> Response:
    """Captured bytes as a response that runs nothing and tells the pirate nothing."""
    return Response(
        body,
        media_type=media_type,
        headers={
            "Content-Security-Policy": EVIDENCE_CSP,
            "Referrer-Policy": "no-referrer",
            "Content-Disposition": disposition,
            **headers,
        },
    )


def _marked_copy(
    ctx: Context,
    finding: dict[str, Any],
    page: dict[str, Any],
    raw: bytes,
    charset: str,
    part: int | None,
) -> bytes:
    """The capture (or its part ``part`` when it is large) decoded and made inert, with the
    finding's passages marked (UTF-8)."""
    master = ctx.db.masters.find_one({"_id": finding["master_id"]}, {"text": 1}) or {}
    found = [p.page_text for p in passages(finding, master.get("text", ""), stored_text(ctx, page))]
    parts = part_count(len(raw))
    if parts > 1:
        part = min(part or part_holding(raw, found, page.get("encoding") or "utf-8"), parts)
        raw = capture_part(raw, part)
    try:
        html = decode_html(raw, "text/html" + charset).text
    except UnusableContent:
        html = ""  # not text: nothing to show
    marked, _ = marked_copy(html, found)
    return marked.encode("utf-8")


#: The media types an image read by OCR is served as; any other is a download of bytes.
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp"})


@router.get("/pages/{page_id}/images/{n}")
def page_image_file(
    request: Request, user: Viewer, page_id: str, n: Annotated[int, Path(ge=0, le=10_000)]
) -> Response:
    """The ``n``-th image (from 0) whose text OCR read, exactly as fetched."""
    ctx = app_context(request)
    page = ctx.db.pages.find_one({"_id": _oid(page_id)}, {"ocr_images": 1})
    found = None if page is None else page_image(ctx, page, n)
    if page is None or found is None:
        raise HTTPException(404, _("no such image of this page"))
    body, media_type = found
    media_type = media_type.split(";")[0].strip().lower()
    if media_type not in _IMAGE_TYPES:  # never served as markup or script (an SVG, HTML)
        media_type = "application/octet-stream"
    name = page["ocr_images"][n]["sha256"]
    return _evidence_file(body, media_type, f'inline; filename="{name}"',
                          {"X-Content-Type-Options": "nosniff"})  # fmt: skip
