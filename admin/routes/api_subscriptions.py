"""The API's operations on alerts: subscriptions (listed, created, deleted) and the
delivery log. As on the admin's pages, reading is for every user and changing for
reviewers; a webhook's secret is taken, never given back (``secret_set`` says one is)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal

from fastapi import HTTPException, Path, Query, Request
from pydantic import BaseModel, Field

from tracker.enforcement.deliveries import STATE_LABELS, deliveries_page
from tracker.enforcement.subscriptions import (
    EVENTS,
    FREQUENCIES,
    LANGUAGES,
    MAX_EMAILS,
    SubscriptionError,
    add_subscription,
    list_subscriptions,
    public,
)
from tracker.findings.notices import EMAIL_ADDRESS

from ..i18n import N_
from ..security import Reviewer, Viewer, app_context
from ..web import MAX_PAGE
from .api_base import PREFIX, Strict, api_router, errors, example, named_enum, too_large

router = api_router(PREFIX)
# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    AlertEvent = StrEnum
    AlertFrequency = StrEnum
    AlertLanguage = StrEnum
    DeliveryState = StrEnum
else:
    AlertEvent = named_enum(
        "AlertEvent",
        N_(
            "What a subscription is told about: new findings, confirmed findings, notices overdue "
            "(past their deadline), copies still there after the deadline, crawl runs that failed."
        ),
        EVENTS,
    )
    AlertFrequency = named_enum(
        "AlertFrequency",
        N_("How often alerts go out: at once, an hourly or a daily digest."),
        tuple(FREQUENCIES),
    )
    AlertLanguage = named_enum(
        "AlertLanguage", N_("The language of a subscription's alerts."), LANGUAGES
    )
    DeliveryState = named_enum(
        "DeliveryState",
        N_("Where a delivery stands: pending (to be retried), delivered, failed (given up)."),
        tuple(STATE_LABELS),
    )
#: A subscription's name as the tracker takes it (anchored: JSON Schema patterns search).
NAME_PATTERN = r"^[\w][\w .@-]{0,63}$"
_EMAIL_PATTERN = f"^{EMAIL_ADDRESS.pattern}$"
_WEBHOOK_PATTERN = r"^https?://[^\s/?#]+\S*$"


class EmailChannel(Strict):
    """Alerts by e-mail, through the relay COPYTRACK_SMTP_URL names."""

    channel: Literal["email"]
    emails: list[Annotated[str, Field(max_length=320, pattern=_EMAIL_PATTERN)]] = Field(
        min_length=1, max_length=MAX_EMAILS
    )


class WebhookChannel(Strict):
    """Alerts POSTed as JSON, signed with the secret (X-Copytrack-Signature)."""

    channel: Literal["webhook"]
    url: str = Field(max_length=2000, pattern=_WEBHOOK_PATTERN)
    secret: str = Field(
        min_length=1,
        max_length=500,
        pattern=r"\S",
        description=N_("Signs each request (HMAC-SHA256); stored, never returned"),
        json_schema_extra={"writeOnly": True},
    )


class SubscriptionIn(Strict):
    model_config = example(
        name="rights team",
        to={"channel": "email", "emails": ["rights@press.example"]},
        when=["new", "confirmed"],
        every="day",
        lang="zh",
        domain="pirate.example",
        min_score=0.5,
    )

    name: str = Field(
        max_length=64,
        pattern=NAME_PATTERN,
        description=N_("Unique: letters, digits, spaces, '.', '@', '-' or '_'"),
    )
    to: EmailChannel | WebhookChannel = Field(discriminator="channel")
    when: list[AlertEvent] = Field(
        default_factory=lambda: [AlertEvent("new")], max_length=len(EVENTS)
    )
    every: AlertFrequency = AlertFrequency("now")
    lang: AlertLanguage = AlertLanguage("en")
    campaign: str | None = Field(None, max_length=200, description=N_("Only this campaign's"))
    works: list[Annotated[str, Field(max_length=200)]] = Field(
        default_factory=list, max_length=1000, description=N_("Only these works' (their ids)")
    )
    domain: str | None = Field(None, max_length=300, description=N_("Only copies on this domain"))
    min_score: float | None = Field(None, ge=0, le=1, description=N_("At least this score"))
    min_chars: int | None = Field(None, ge=0, le=10**9, description=N_("At least this many copied"))


class SubscriptionOut(BaseModel):
    model_config = example(
        id="665f1c2ab3e4d5f6a7b8c9f2",
        name="rights team",
        channel="email",
        emails=["rights@press.example"],
        webhook=None,
        secret_set=False,
        when=["new", "confirmed"],
        every="day",
        lang="zh",
        campaign=None,
        works=[],
        domain="pirate.example",
        min_score=0.5,
        min_chars=None,
        by="rui",
        created_at="2024-06-10T09:30:00Z",
        last_batch_at=None,
    )

    id: str
    name: str
    channel: Literal["email", "webhook"]
    emails: list[str]
    webhook: str | None = Field(description=N_("The webhook's URL (null: by e-mail)"))
    secret_set: bool = Field(description=N_("Whether the webhook has a secret (never shown)"))
    when: list[AlertEvent]
    every: AlertFrequency
    lang: AlertLanguage
    campaign: str | None
    works: list[str]
    domain: str | None
    min_score: float | None
    min_chars: int | None
    by: str = Field(description=N_("Who subscribed it"))
    created_at: datetime
    last_batch_at: datetime | None = Field(description=N_("When it was last sent alerts"))


def _subscription_out(doc: dict[str, Any]) -> SubscriptionOut:
    # The secret never leaves the tracker (the tracker's own answers have it out already).
    shown = doc if "secret_set" in doc else public(doc)
    fields = {name: shown.get(name) for name in SubscriptionOut.model_fields}
    fields.update(
        id=str(doc["_id"]),
        channel="webhook" if shown.get("webhook") else "email",
        by=shown.get("by") or "copytrack",
    )
    return SubscriptionOut(**fields)


@router.get(
    "/subscriptions",
    tags=["alerts"],
    response_model=list[SubscriptionOut],
    name="list_subscriptions",
    summary=N_("List alert subscriptions"),
    description="By name; a webhook's secret is never shown, only whether one is set.",
    responses=errors(),
)
def list_subscriptions_api(request: Request, user: Viewer) -> list[SubscriptionOut]:
    return [_subscription_out(doc) for doc in list_subscriptions(app_context(request))]


@router.post(
    "/subscriptions",
    tags=["alerts"],
    response_model=SubscriptionOut,
    status_code=201,
    name="create_subscription",
    summary=N_("Subscribe to alerts"),
    description="E-mail addresses or one webhook; what of (events, narrowed by campaign, "
    "works, domain, score, copied characters), how often and in which language.",
    responses=errors(
        400,
        409,
        413,
        e400="The body is not JSON",
        e409="A subscription of that name exists: delete it first or choose another name",
        e413=too_large("/subscriptions", "a subscription"),
    ),
)
def create_subscription(request: Request, user: Reviewer, body: SubscriptionIn) -> SubscriptionOut:
    to = body.to
    channel: dict[str, Any] = (
        {"webhook": to.url, "secret": to.secret}
        if isinstance(to, WebhookChannel)
        else {"emails": to.emails}
    )
    # The narrowing fields go as they are, the enums as their values.
    fields = body.model_dump(mode="json", exclude={"name", "to"})
    try:
        added = add_subscription(app_context(request), body.name, by=user.name, **fields, **channel)
    except SubscriptionError as err:
        # The document states every rule of a field; what is left is a name taken.
        raise HTTPException(409, str(err)) from None
    return _subscription_out(added)


@router.delete(
    "/subscriptions/{name}",
    tags=["alerts"],
    response_model=SubscriptionOut,
    summary=N_("Delete an alert subscription"),
    description="Its deliveries stay in the log. Answers the subscription as it was.",
    responses=errors(404, e404="No subscription of that name"),
)
def delete_subscription(
    request: Request, user: Reviewer, name: Annotated[str, Path(max_length=64)]
) -> SubscriptionOut:
    gone = app_context(request).db.subscriptions.find_one_and_delete({"name": name.strip()})
    if gone is None:
        raise HTTPException(404, f"no subscription {name!r}: list them with list_subscriptions")
    return _subscription_out(gone)


class AttemptOut(BaseModel):
    at: datetime
    ok: bool
    answer: str = Field(description=N_("The SMTP reply or HTTP status, or what went wrong"))


class DeliveryOut(BaseModel):
    model_config = example(
        id="665f1c2ab3e4d5f6a7b8c9f3",
        subscription="rights team",
        channel="webhook",
        to=["https://hooks.press.example/copytrack"],
        lang="en",
        subject="copytrack: 3 new findings",
        state="delivered",
        events={"new": 3},
        finding_ids=["665f1c2ab3e4d5f6a7b8c9d0"],
        created_at="2024-06-10T09:30:00Z",
        delivered_at="2024-06-10T09:30:01Z",
        failed_at=None,
        answer="HTTP 200",
        attempts=[{"at": "2024-06-10T09:30:01Z", "ok": True, "answer": "HTTP 200"}],
    )

    id: str
    subscription: str = Field(description=N_("The subscription's name"))
    channel: Literal["email", "webhook"]
    to: list[str] = Field(description=N_("The addresses, or the webhook's URL"))
    lang: str
    subject: str
    state: DeliveryState
    events: dict[str, int] = Field(description=N_("How many of each event it tells of"))
    finding_ids: list[str]
    created_at: datetime
    delivered_at: datetime | None
    failed_at: datetime | None
    answer: str | None = Field(description=N_("The latest attempt's answer (null: none yet)"))
    attempts: list[AttemptOut] = Field(description=N_("Oldest first"))


class DeliveryPage(BaseModel):
    total: int
    page: int
    per_page: int
    items: list[DeliveryOut]


def _delivery_out(doc: dict[str, Any]) -> DeliveryOut:
    fields = {name: doc.get(name) for name in DeliveryOut.model_fields}
    fields.update(
        id=str(doc["_id"]),
        finding_ids=[str(i) for i in doc.get("finding_ids", [])],
        events=doc.get("events") or {},
        attempts=doc.get("attempts", []),
    )
    return DeliveryOut(**fields)


@router.get(
    "/deliveries",
    tags=["alerts"],
    response_model=DeliveryPage,
    summary=N_("The alert delivery log"),
    description="Newest first: what went to whom, when, each attempt and the answer.",
    responses=errors(),
)
def get_deliveries(
    request: Request,
    user: Viewer,
    subscription: Annotated[
        str | None, Query(max_length=64, description=N_("Only this subscription's"))
    ] = None,
    state: DeliveryState | None = None,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> DeliveryPage:
    total, docs = deliveries_page(
        app_context(request), page, per_page, subscription, state.value if state else None
    )
    return DeliveryPage(
        total=total, page=page, per_page=per_page, items=[_delivery_out(d) for d in docs]
    )
