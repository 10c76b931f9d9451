"""Enforcement pages: the funnel and its export, alert subscriptions and their delivery log,
notices e-mailed from a confirmed finding or for a whole domain, delisting exports.

Reading is for every user; subscribing, sending and exporting a delisting request (which
records the URLs as requested) need a reviewer. A webhook's secret is never shown back.
"""

from __future__ import annotations

from typing import Annotated

from bson import ObjectId
from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from tracker.enforcement.delisting import ENGINES, export_delisting
from tracker.enforcement.deliveries import STATE_LABELS, list_deliveries
from tracker.enforcement.recipients import SOURCE_LABELS
from tracker.enforcement.sending import prepare_notice, send_notice
from tracker.enforcement.subscriptions import (
    EVENT_LABELS,
    FREQUENCIES,
    Fields,
    SubscriptionError,
    add_subscription,
    describe_filters,
    get_subscription,
    list_subscriptions,
    public,
    update_subscription,
)
from tracker.enforcement.timeline import (
    BY,
    FunnelRow,
    funnel,
    funnel_csv,
    funnel_totals,
)
from tracker.findings import NOTICE_LANGUAGES, FindingNotFound, WorkflowError, parse_object_id

from ..i18n import _
from ..security import Reviewer, Viewer, app_catalogue, app_context, flash
from ..web import download, redirect, render

router = APIRouter(include_in_schema=False)
#: Rows of the funnel the dashboard's panel shows (the page shows them all).
PANEL_ROWS = 5


def funnel_panel(request: Request) -> list[FunnelRow]:
    """The dashboard's panel: the domains with the most copies, their funnel."""
    return funnel(app_context(request), "domain", PANEL_ROWS, app_catalogue(request))


def _by(value: str) -> str:
    if value not in BY:
        raise HTTPException(404, _("no such funnel"))
    return value


@router.get("/enforcement")
def enforcement(request: Request, user: Viewer) -> HTMLResponse:
    ctx = app_context(request)
    catalogue = app_catalogue(request)
    domains, works = (
        funnel(ctx, "domain", catalogue=catalogue),
        funnel(ctx, "work", catalogue=catalogue),
    )
    return render(
        request, "enforcement.html", domains=domains, works=works,
        totals=funnel_totals(domains), engines=ENGINES,
    )  # fmt: skip


@router.get("/enforcement/funnel.csv")
def funnel_export(request: Request, user: Viewer, by: str = "domain") -> Response:
    rows = funnel(app_context(request), _by(by), catalogue=app_catalogue(request))
    return _csv(funnel_csv(rows, by), f"copytrack-funnel-{by}.csv")


def _csv(text: str, name: str) -> Response:
    """A CSV download, with a BOM so that Excel reads it as UTF-8."""
    return download("\ufeff" + text, "text/csv; charset=utf-8", name)


@router.get("/enforcement/delisting.csv")
def delisting_export(
    request: Request,
    user: Reviewer,
    engine: str = "google",
    work: Annotated[str, Query(max_length=200)] = "",
    domain: Annotated[str, Query(max_length=300)] = "",
) -> Response:
    """The engine's removal request for a work's or a domain's confirmed copies; each URL
    is recorded as requested."""
    try:
        made = export_delisting(
            app_context(request), engine, work=work or None, domain=domain or None, by=user.name
        )
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect("/enforcement")
    name = f"copytrack-delisting-{engine}-{work or domain}.csv"
    return _csv(made.csv, "".join(c if c.isalnum() or c in ".-_" else "_" for c in name))


# -- subscriptions and their deliveries --------------------------------------------------


@router.get("/subscriptions")
def subscriptions(request: Request, user: Viewer) -> HTMLResponse:
    return render(
        request, "subscriptions.html", subscriptions=list_subscriptions(app_context(request)),
        events=EVENT_LABELS, frequencies=tuple(FREQUENCIES), describe=describe_filters,
    )  # fmt: skip


def _form(
    emails: str, webhook: str, secret: str, when: list[str], every: str, lang: str,
    domain: str, min_score: str,
) -> Fields:  # fmt: skip
    """The form's fields as the tracker takes them (ValueError for a score not a number)."""
    return {
        "emails": emails.replace(",", " ").split(), "webhook": webhook or None,
        "secret": secret or None, "when": when,
        "every": every, "lang": lang, "domain": domain or None,
        "min_score": float(min_score) / 100 if min_score.strip() else None,
    }  # fmt: skip


Name = Annotated[str, Form(max_length=64)]
When = Annotated[list[str], Form(default_factory=list)]
Emails = Annotated[str, Form(max_length=2000)]
Webhook = Annotated[str, Form(max_length=2000)]
Secret = Annotated[str, Form(max_length=500)]
Every = Annotated[str, Form(max_length=10)]
Lang = Annotated[str, Form(max_length=5)]
Domain = Annotated[str, Form(max_length=300)]
Score = Annotated[str, Form(max_length=10)]


@router.post("/subscriptions")
def subscription_add(
    request: Request, user: Reviewer, name: Name, when: When, emails: Emails = "",
    webhook: Webhook = "", secret: Secret = "", every: Every = "now", lang: Lang = "en",
    domain: Domain = "", min_score: Score = "",
) -> Response:  # fmt: skip
    try:
        fields = _form(emails, webhook, secret, when, every, lang, domain, min_score)
        add_subscription(app_context(request), name, by=user.name, **fields)
    except (SubscriptionError, ValueError) as err:
        flash(request, str(err), "error")
        return redirect("/subscriptions")
    flash(request, _("Subscription %(name)s added.") % {"name": name.strip()})
    return redirect("/subscriptions")


@router.get("/subscriptions/{subscription_id}/edit")
def subscription_edit_form(request: Request, user: Reviewer, subscription_id: str) -> Response:
    found = get_subscription(app_context(request), _subscription_id(subscription_id))
    if found is None:
        raise HTTPException(404, _("no such subscription"))
    return render(request, "subscription_edit.html", s=public(found), events=EVENT_LABELS)


@router.post("/subscriptions/{subscription_id}/edit")
def subscription_edit(
    request: Request, user: Reviewer, subscription_id: str, name: Name, when: When,
    emails: Emails = "", webhook: Webhook = "", secret: Secret = "", every: Every = "now",
    lang: Lang = "en", domain: Domain = "", min_score: Score = "",
) -> Response:  # fmt: skip
    oid = _subscription_id(subscription_id)
    try:
        fields = _form(emails, webhook, secret, when, every, lang, domain, min_score)
        update_subscription(app_context(request), oid, name=name, **fields)
    except (SubscriptionError, ValueError) as err:
        flash(request, str(err), "error")
        return redirect(f"/subscriptions/{subscription_id}/edit")
    flash(request, _("Subscription %(name)s changed.") % {"name": name.strip()})
    return redirect("/subscriptions")


def _subscription_id(value: str) -> ObjectId:
    try:
        return parse_object_id(value)
    except ValueError:
        raise HTTPException(404, _("no such subscription")) from None


@router.post("/subscriptions/{subscription_id}/delete")
def subscription_delete(request: Request, user: Reviewer, subscription_id: str) -> Response:
    gone = app_context(request).db.subscriptions.find_one_and_delete(
        {"_id": _subscription_id(subscription_id)}
    )
    if gone is None:
        raise HTTPException(404, _("no such subscription"))
    flash(request, _("Subscription %(name)s removed; its deliveries stay in the log.")
          % {"name": gone["name"]})  # fmt: skip
    return redirect("/subscriptions")


@router.get("/deliveries")
def deliveries(request: Request, user: Viewer, subscription: str = "") -> HTMLResponse:
    log = list_deliveries(app_context(request), 200, subscription or None)
    return render(request, "deliveries.html", deliveries=log, states=STATE_LABELS,
                  subscription=subscription)  # fmt: skip


# -- notices e-mailed ---------------------------------------------------------------------


def _which(finding: str, domain: str) -> tuple[ObjectId | None, str | None]:
    """(finding id, domain): what a notice is of."""
    if finding:
        try:
            return parse_object_id(finding), None
        except ValueError:
            raise HTTPException(404, _("no such finding")) from None
    return None, domain or None


@router.get("/enforcement/notice")
def notice_send_form(
    request: Request,
    user: Reviewer,
    finding: Annotated[str, Query(max_length=40)] = "",
    domain: Annotated[str, Query(max_length=300)] = "",
    lang: str = "zh",
) -> Response:
    """A notice to e-mail, for one confirmed finding or every confirmed finding of a domain,
    with the addresses copytrack proposes (RDAP, the site's own contact)."""
    back = f"/findings/{finding}" if finding else "/enforcement"
    try:
        finding_id, of_domain = _which(finding, domain)
        prepared = prepare_notice(
            app_context(request), lang=lang, finding_id=finding_id, domain=of_domain
        )
    except FindingNotFound:
        raise HTTPException(404, _("no such finding")) from None
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(back)
    return render(
        request, "notice_send.html", notice=prepared, finding=finding, domain=domain,
        languages=NOTICE_LANGUAGES, sources=SOURCE_LABELS, back=back,
    )  # fmt: skip


@router.post("/enforcement/notice")
def notice_send(
    request: Request,
    user: Reviewer,
    lang: Annotated[str, Form()],
    subject: Annotated[str, Form(max_length=500)],
    body: Annotated[str, Form(max_length=100_000)],
    ids: Annotated[list[str], Form(default_factory=list)],
    to: Annotated[list[str], Form(default_factory=list)],
    more: Annotated[str, Form(max_length=2000)] = "",
    back: Annotated[str, Form(max_length=400)] = "/enforcement",
) -> Response:
    """E-mail the notice through the configured relay, to the addresses ticked and added."""
    try:
        finding_ids = [parse_object_id(i) for i in ids]
    except ValueError:
        raise HTTPException(404, _("no such finding")) from None
    back = back if back.startswith("/") and not back.startswith("//") else "/enforcement"
    try:
        sent = send_notice(
            app_context(request), finding_ids, lang=lang, subject=subject, body=body,
            recipients=[*to, *more.replace(",", " ").split()], by=user.name,
        )  # fmt: skip
    except FindingNotFound:
        raise HTTPException(404, _("no such finding")) from None
    except WorkflowError as err:
        flash(request, str(err), "error")
        return redirect(back)
    message = _("Notice e-mailed to %(to)s (%(num)s finding(s)); the relay answered: %(answer)s")
    flash(request, message % {"to": ", ".join(sent.accepted), "num": sent.findings,
                              "answer": sent.answer})  # fmt: skip
    for address, answer in sent.refused.items():
        refused = _("Refused %(address)s: %(answer)s")
        flash(request, refused % {"address": address, "answer": answer}, "warn")
    return redirect(back)
