"""Exports: findings as CSV, printable reports per work and per domain (HTML and PDF)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response, StreamingResponse

from tracker.findings import (
    Report,
    WorkflowError,
    domain_report,
    findings_csv,
    normalize_domain,
    parse_filter,
    work_report,
)

from ..security import Viewer, app_context
from ..web import STATIC_DIR, render, templates

router = APIRouter(include_in_schema=False)
Format = Literal["html", "pdf"]


@router.get("/exports/findings.csv")
def export_csv(request: Request, user: Viewer) -> StreamingResponse:
    flt = parse_filter(request.query_params)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M")
    return StreamingResponse(
        findings_csv(app_context(request), flt),
        media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="copytrack-findings-{stamp}.csv"'},
    )


def _pdf(html: str) -> bytes:
    """The report as PDF; WeasyPrint fetches nothing (the stylesheet is given directly)."""
    # Imported here: it takes about a second to load, and only PDF exports need it.
    import weasyprint
    from weasyprint.urls import URLFetcher

    class NoFetch(URLFetcher):
        def fetch(self, url: str, headers: dict | None = None) -> None:
            raise ValueError(f"reports load nothing from outside: {url}")

    document = weasyprint.HTML(string=html, url_fetcher=NoFetch())
    return document.write_pdf(stylesheets=[weasyprint.CSS(filename=STATIC_DIR / "print.css")])


def _report_response(request: Request, report: Report, fmt: Format, filename: str) -> Response:
    if fmt == "html":
        return render(request, "report.html", report=report, pdf=False)
    html = templates.get_template("report.html").render(report=report, pdf=True)
    return Response(
        _pdf(html),
        media_type="application/pdf",
        headers={"Content-Disposition": f'attachment; filename="{filename}.pdf"'},
    )


@router.get("/reports/work")
def report_work(
    request: Request,
    user: Viewer,
    work: Annotated[str, Query(min_length=1, max_length=200)],
    format: Format = "html",
) -> Response:
    report = work_report(app_context(request), work)
    if report is None:
        raise HTTPException(404, f"no work {work!r} in the library")
    return _report_response(request, report, format, f"copytrack-work-{report.master['_id']}")


@router.get("/reports/domain")
def report_domain(
    request: Request,
    user: Viewer,
    domain: Annotated[str, Query(min_length=1, max_length=300)],
    format: Format = "html",
) -> Response:
    try:
        domain = normalize_domain(domain)
    except WorkflowError as err:
        raise HTTPException(400, str(err)) from None
    report = domain_report(app_context(request), domain)
    return _report_response(request, report, format, f"copytrack-domain-{domain}")
