"""Operators: the domains of findings grouped by what their captures share; reviewers
split a wrong tie (kept across re-crawls) or have the grouping done again now."""

from __future__ import annotations

from typing import Annotated

from bson import ObjectId
from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from tracker.findings import parse_object_id
from tracker.operators.grouping import SplitError, group_operators, refresh_signals, split_domain
from tracker.operators.queries import list_operators, operator_detail

from ..i18n import N_, _
from ..security import Reviewer, Viewer, app_context, flash
from ..web import redirect, render

router = APIRouter(include_in_schema=False)
#: Each kind of tie, as the pages name it.
TIE_LABELS = {
    "analytics": N_("Same analytics or ad account"),
    "redirect": N_("Redirects to the same domain"),
    "ip": N_("Same address at capture"),
    "favicon": N_("Same favicon"),
    "template": N_("Same page template"),
}


@router.get("/operators")
def operators_list(request: Request, user: Viewer) -> HTMLResponse:
    ctx = app_context(request)
    return render(request, "operators.html", operators=list_operators(ctx), labels=TIE_LABELS)


@router.post("/operators/regroup")
def operators_regroup(request: Request, user: Reviewer) -> Response:
    """Read the signals of new captures and group the domains again, now."""
    ctx = app_context(request)
    read = refresh_signals(ctx)
    grouped = group_operators(ctx)
    flash(request, _("%(pages)s capture(s) read; %(num)s operator(s).")
          % {"pages": read, "num": len(grouped)})  # fmt: skip
    return redirect("/operators")


@router.get("/operators/{operator_id}")
def operator_page(request: Request, user: Viewer, operator_id: str) -> HTMLResponse:
    operator = _detail(request, operator_id)
    return render(request, "operator.html", operator=operator, labels=TIE_LABELS)


@router.post("/operators/{operator_id}/split")
def operator_split(
    request: Request,
    user: Reviewer,
    operator_id: str,
    domain: Annotated[str, Form(max_length=300)],
) -> Response:
    """Keep ``domain`` apart from the operator's other domains, from now on."""
    ctx = app_context(request)
    try:
        split_domain(ctx, _oid(operator_id), domain, user.name)
    except SplitError as err:
        flash(request, str(err), "error")
        return redirect(f"/operators/{operator_id}")
    flash(request, _("%(domain)s is split off; it stays apart from these domains after "
                     "re-crawls.") % {"domain": domain})  # fmt: skip
    still = ctx.db.operators.find_one({"_id": _oid(operator_id)}, {"_id": 1})
    return redirect(f"/operators/{operator_id}" if still else "/operators")


def _oid(value: str) -> ObjectId:
    try:
        return parse_object_id(value)
    except ValueError:
        raise HTTPException(404, _("no such operator")) from None


def _detail(request: Request, operator_id: str) -> dict:
    operator = operator_detail(app_context(request), _oid(operator_id))
    if operator is None:
        raise HTTPException(404, _("no such operator"))
    return operator
