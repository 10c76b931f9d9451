"""Exports: findings as CSV, printable reports per work and per domain, and the evidence
report of one finding (HTML and PDF)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import FileResponse, Response, StreamingResponse

from tracker.findings import (
    REPORT_PAGE,
    FindingNotFound,
    Report,
    WorkflowError,
    capture,
    domain_report,
    evidence,
    findings_csv,
    normalize_domain,
    parse_filter,
    parse_object_id,
    work_report,
)

from ..evidence_report import evidence_pdf, report_context
from ..i18n import _
from ..pdf import pdf
from ..report_pdfs import Build
from ..security import Viewer, app_context
from ..web import download, download_headers, reading_zone, render, templates

router = APIRouter(include_in_schema=False)
Format = Literal["html", "pdf"]


@router.get("/exports/findings.csv")
def export_csv(request: Request, user: Viewer) -> StreamingResponse:
    flt = parse_filter(request.query_params)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    return StreamingResponse(
        findings_csv(app_context(request), flt),
        media_type="text/csv; charset=utf-8",
        headers=download_headers(f"copytrack-findings-{stamp}.csv"),
    )


def _report_response(request: Request, report: Report, fmt: Format, filename: str) -> Response:
    if fmt == "html":
        return render(request, "report.html", report=report, pdf=False)
    with reading_zone(request):
        html = templates.get_template("report.html").render(report=report, pdf=True)
    return download(pdf(html), "application/pdf", f"{filename}.pdf")


@router.get("/reports/work")
def report_work(
    request: Request,
    user: Viewer,
    work: Annotated[str, Query(min_length=1, max_length=200)],
    format: Format = "html",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> Response:
    """A work's report: its detail paged in HTML; the PDF lists every finding (built off
    the request past a page of them)."""
    ctx = app_context(request)
    report = work_report(ctx, work, page, REPORT_PAGE)
    if report is None or report.master is None:
        raise HTTPException(404, f"no work {work!r} in the library")
    if format == "pdf" and report.pages > 1:
        with reading_zone(request):
            build = request.app.state.report_pdfs.build(work, "all", kind="work")
        return _work_pdf_progress(request, report, work, build)
    name = f"copytrack-work-{report.master['_id']}"
    if format == "pdf":
        report = work_report(ctx, work, per_page=None) or report
    return _report_response(request, report, format, name)


def _work_pdf_progress(request: Request, report: Report, work: str, build: Build) -> Response:
    link = urlencode({"work": work})
    return render(
        request,
        "report_pdf.html",
        heading=_("Work report · %(work)s") % {"work": report.subject},
        build=build,
        download=f"/reports/work.pdf?{link}",
        back=f"/reports/work?{link}",
    )


@router.get("/reports/work.pdf")
def report_work_pdf(
    request: Request, user: Viewer, work: Annotated[str, Query(min_length=1, max_length=200)]
) -> Response:
    """A long work report's PDF once its build is done (until then, its progress)."""
    report = work_report(app_context(request), work, 1, REPORT_PAGE)
    if report is None or report.master is None:
        raise HTTPException(404, f"no work {work!r} in the library")
    with reading_zone(request):
        build = request.app.state.report_pdfs.build(work, "all", kind="work")
    return _built_pdf(
        build,
        lambda: _work_pdf_progress(request, report, work, build),
        f"copytrack-work-{report.master['_id']}.pdf",
    )


def _built_pdf(build: Build, progress: Callable[[], Response], filename: str) -> Response:
    """A report's PDF built off the request: the file once ready, else its progress."""
    if not build.ready:
        return progress()
    return FileResponse(build.path, media_type="application/pdf", filename=filename)


def _domain(asked: str) -> str:
    """The domain a report is asked for, as stored (400 for what is not a domain)."""
    try:
        return normalize_domain(asked)
    except WorkflowError as err:
        raise HTTPException(400, str(err)) from None


@router.get("/reports/domain")
def report_domain(
    request: Request,
    user: Viewer,
    domain: Annotated[str, Query(min_length=1, max_length=300)],
    format: Format = "html",
    scope: Literal["reviewed", "all"] = "reviewed",
    page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
) -> Response:
    """A domain's report: reviewed findings by default (``scope=all``: every one), its
    detail paged in HTML; the PDF lists the whole scope."""
    domain = _domain(domain)
    ctx = app_context(request)
    report = domain_report(ctx, domain, scope, page, REPORT_PAGE)
    if format == "pdf" and report.pages > 1:
        # More than a page of findings: built off the request, this page shows how far.
        with reading_zone(request):
            build = request.app.state.report_pdfs.build(domain, scope)
        return _pdf_progress(request, domain, scope, build)
    if format == "pdf":
        report = domain_report(ctx, domain, scope, per_page=None)
    return _report_response(request, report, format, f"copytrack-domain-{domain}")


def _domain_link(path: str, domain: str, scope: str) -> str:
    return f"{path}?{urlencode({'domain': domain, 'scope': scope})}"


def _pdf_progress(request: Request, domain: str, scope: str, build: Build) -> Response:
    return render(
        request,
        "report_pdf.html",
        heading=_("Domain report · %(domain)s") % {"domain": domain},
        build=build,
        download=_domain_link("/reports/domain.pdf", domain, scope),
        back=_domain_link("/reports/domain", domain, scope),
    )


@router.get("/reports/domain.pdf")
def report_domain_pdf(
    request: Request,
    user: Viewer,
    domain: Annotated[str, Query(min_length=1, max_length=300)],
    scope: Literal["reviewed", "all"] = "reviewed",
) -> Response:
    """A long domain report's PDF once its build is done (until then, its progress)."""
    domain = _domain(domain)
    with reading_zone(request):
        build = request.app.state.report_pdfs.build(domain, scope)
    return _built_pdf(
        build,
        lambda: _pdf_progress(request, domain, scope, build),
        f"copytrack-domain-{domain}.pdf",
    )


@router.get("/findings/{finding_id}/evidence")
def evidence_report(
    request: Request, user: Viewer, finding_id: str, format: Format = "html"
) -> Response:
    """One finding's evidence for a legal team; the PDF carries the capture as an attachment."""
    ctx = app_context(request)
    try:
        found = evidence(ctx, parse_object_id(finding_id))
    except (FindingNotFound, ValueError):
        raise HTTPException(404, _("no such finding")) from None
    if format == "html":
        raw = capture(ctx, found.finding["page_id"])
        return render(request, "evidence.html", pdf=False, **report_context(ctx, found, raw))
    with reading_zone(request):
        made = evidence_pdf(ctx, found)
    return download(made, "application/pdf", f"copytrack-evidence-{finding_id}.pdf")
