"""The dashboard: headline counts, findings per day, top domains and works, latest runs."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from tracker.findings import dashboard as dashboard_figures
from tracker.findings import recent_runs
from tracker.operators.queries import new_operator_domains

from ..charts import bar_chart
from ..security import Viewer, app_catalogue, app_context
from ..web import render
from .enforcement import funnel_panel

router = APIRouter(include_in_schema=False)


@router.get("/")
def dashboard(request: Request, user: Viewer) -> HTMLResponse:
    ctx = app_context(request)
    figures = dashboard_figures(ctx, catalogue=app_catalogue(request))
    chart = bar_chart([(row["day"], row["findings"]) for row in figures["per_day"]])
    return render(
        request,
        "dashboard.html",
        figures=figures,
        chart=chart,
        runs=recent_runs(ctx, limit=8),
        new_operator_domains=new_operator_domains(ctx),
        funnel=funnel_panel(request),
        top_domain_max=max((d["findings"] for d in figures["top_domains"]), default=1),
        top_work_max=max((w["pages"] for w in figures["top_works"]), default=1),
    )
