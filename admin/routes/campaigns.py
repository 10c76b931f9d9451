"""Crawl campaigns: list, create and edit (admins), run now, run history; a run's page
(what it fetched, and every URL it skipped or failed, with the reason) and its live
progress as JSON, which the campaign and run pages poll while a run goes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool

from tracker.campaigns import Campaign, NotRunning
from tracker.findings import recent_runs

from .. import campaigns as seam
from ..i18n import _
from ..security import Admin, Viewer, app_context, flash
from ..web import MAX_PAGE, redirect, render

router = APIRouter(include_in_schema=False)


@router.get("/campaigns")
def campaign_list(request: Request, user: Viewer) -> HTMLResponse:
    ctx = app_context(request)
    return render(
        request, "campaigns.html", overview=seam.overview(ctx), runs=recent_runs(ctx, limit=20)
    )


def _form_page(
    request: Request,
    values: dict[str, str],
    original: str | None,
    problems: dict[str, str] | None = None,
) -> HTMLResponse:
    return render(
        request,
        "campaign_form.html",
        status_code=400 if problems else 200,
        values=values,
        original=original,
        problems=problems or {},
    )


def _save(request: Request, fields: dict[str, str], original: str | None) -> Response:
    if original is not None:
        fields["name"] = original  # a campaign keeps its name: runs and findings refer to it
    try:
        campaign = seam.parse_form(fields)
        seam.save(app_context(request), campaign, is_new=original is None)
    except seam.FormError as err:
        return _form_page(request, fields, original, err.problems)
    flash(request, _("Campaign %(name)s saved.") % {"name": campaign.name})
    return redirect(f"/campaigns/{campaign.name}")


async def _submitted(request: Request, original: str | None) -> Response:
    form = await request.form()
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    # Saving resolves the seeds' host names: keep that off the event loop.
    return await run_in_threadpool(_save, request, fields, original)


def _campaign(request: Request, name: str) -> Campaign:
    campaign = seam.get(app_context(request), name)
    if campaign is None:
        raise HTTPException(404, _("no such campaign"))
    return campaign


@router.get("/campaigns/new")
def new_campaign(request: Request, user: Admin, name: str = "", seeds: str = "") -> HTMLResponse:
    """The form of a new campaign; ``name`` and ``seeds`` filled in when it comes from a
    site discovery proposed."""
    return _form_page(request, seam.as_form(None, {"name": name, "seeds": seeds}), None)


@router.post("/campaigns/new")
async def create_campaign(request: Request, user: Admin) -> Response:
    return await _submitted(request, None)


@router.get("/campaigns/{name}")
def campaign_detail(request: Request, user: Viewer, name: str) -> HTMLResponse:
    campaign = _campaign(request, name)
    ctx = app_context(request)
    runs = seam.history(ctx, name)
    current = runs[0] if runs and seam.progress(runs[0])["stoppable"] else None
    return render(
        request,
        "campaign.html",
        campaign=campaign,
        next_runs=seam.next_runs(campaign.schedule),
        runs=runs,
        current=current,
        waiting=seam.waiting_for_worker(ctx, current) if current else None,
        proposals=seam.proposals(app_context(request), name) if campaign.kind == "discover" else [],
    )


@router.get("/campaigns/{name}/edit")
def edit_campaign(request: Request, user: Admin, name: str) -> HTMLResponse:
    return _form_page(request, seam.as_form(_campaign(request, name)), name)


@router.post("/campaigns/{name}/edit")
async def update_campaign(request: Request, user: Admin, name: str) -> Response:
    await run_in_threadpool(_campaign, request, name)
    return await _submitted(request, name)


@router.post("/campaigns/{name}/run")
def run_campaign(request: Request, user: Admin, name: str) -> Response:
    try:
        run_id = seam.trigger(app_context(request), name)
    except LookupError:
        raise HTTPException(404, _("no such campaign")) from None
    except (RuntimeError, OSError) as err:
        flash(request, _("Could not start a run: %(reason)s") % {"reason": err}, "error")
    else:
        flash(request, _("Run %(run)s of %(name)s started.") % {"run": run_id, "name": name})
    return redirect(f"/campaigns/{name}")


@router.post("/campaigns/{name}/stop")
def stop_campaign(request: Request, user: Admin, name: str) -> Response:
    """Stop the run under way (admins, as they start runs): recorded cancelled, by whom."""
    try:
        run = seam.stop(app_context(request), name, user.name)
    except LookupError:
        raise HTTPException(404, _("no such campaign")) from None
    except NotRunning:
        flash(request, _("No run of %(name)s is under way.") % {"name": name}, "error")
        return redirect(f"/campaigns/{name}")
    flash(request, _("Run %(run)s of %(name)s stopped.") % {"run": run["_id"], "name": name})
    return redirect(f"/runs/{run['_id']}")


def _run(request: Request, run_id: str) -> dict[str, Any]:
    run = seam.get_run(app_context(request), run_id)
    if run is None:
        raise HTTPException(404, _("no such run"))
    return run


@router.get("/runs/{run_id}")
def run_detail(
    request: Request,
    user: Viewer,
    run_id: str,
    outcome: str = "",
    reason: str = "",
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
) -> HTMLResponse:
    run = _run(request, run_id)
    return render(
        request,
        "run.html",
        run=run,
        progress=seam.progress(run, app_context(request)),
        problems=seam.problems(app_context(request), run, outcome, reason, page),
        filters={"outcome": outcome, "reason": reason},
    )


@router.get("/runs/{run_id}/progress")
def run_progress(request: Request, user: Viewer, run_id: str) -> dict[str, Any]:
    progress = seam.progress(_run(request, run_id), app_context(request))
    # The page's badge shows the state in the reader's words; the API keeps the raw state.
    return {**progress, "state_label": _(progress["state"])}
