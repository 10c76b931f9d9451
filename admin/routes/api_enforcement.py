"""The API's operations on outcomes: a finding's enforcement timeline and the enforcement
funnel per domain or per work (what the finding page and the dashboard show)."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING

from fastapi import Request
from pydantic import BaseModel, Field

from tracker.enforcement.timeline import BY, STEP_LABELS, finding_timeline, funnel

from ..i18n import N_
from ..security import Viewer, app_catalogue, app_context
from .api_base import PREFIX, api_router, errors, example, named_enum, stored_finding

router = api_router(PREFIX)
# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    StepKind = StrEnum
    FunnelBy = StrEnum
else:
    StepKind = named_enum(
        "StepKind",
        N_(
            "What a step of a finding's enforcement was: found, reviewed (a status change), "
            "alerted, notice_sent, notice_failed (the relay refused it), delisting_requested, "
            "delisting_checked, rechecked (the page fetched again after a notice), removed."
        ),
        tuple(STEP_LABELS),
    )
    FunnelBy = named_enum("FunnelBy", N_("What the funnel's rows are: domains or works."), BY)
DEFAULT_BY = FunnelBy("domain")


class StepOut(BaseModel):
    model_config = example(
        at="2024-06-10T09:30:00Z",
        kind="notice_sent",
        label="Notice sent",
        outcome="emailed",
        by="rui",
        to=["abuse@registrar.example"],
        answer="250 2.0.0 Ok: queued as 4F2A1",
        detail="<171797340000.12345@copytrack>",
    )

    at: datetime
    kind: StepKind
    label: str = Field(description=N_("The kind in words (English)"))
    outcome: str = Field(
        description=N_(
            "confirmed, dismissed… (reviewed); delivered, pending, failed (alerted); "
            "emailed or recorded (notice_sent); still_there, removed, unreachable (rechecked); "
            "requested, delisted, still_listed (delisting)"
        )
    )
    by: str = Field(description=N_("Who: a reviewer, a subscription, copytrack, a search provider"))
    to: list[str] = Field(description=N_("Whom it went to (alerts and notices)"))
    answer: str = Field(description=N_("What the other side answered (SMTP reply, HTTP status)"))
    detail: str = Field(description=N_("The Message-ID, the engine, the reviewer's note…"))


class FunnelRowOut(BaseModel):
    model_config = example(
        key="pirate.example",
        title="",
        found=42,
        confirmed=30,
        notified=28,
        removed=19,
        median_days_to_removal=3.5,
        still_there=4,
    )

    key: str = Field(description=N_("The domain, or the work's id"))
    title: str = Field(description=N_("The work's title (empty for a domain)"))
    found: int = Field(description=N_("Copies found (dismissed and licensed ones left out)"))
    confirmed: int = Field(description=N_("Of those, confirmed by a reviewer"))
    notified: int = Field(description=N_("Of those, sent a takedown notice"))
    removed: int = Field(description=N_("Of those, gone after the notice"))
    median_days_to_removal: float | None = Field(
        description=N_("Median days from the first notice to removal (null: none removed)")
    )
    still_there: int = Field(
        description=N_("Copies still there when re-checked after the deadline")
    )


@router.get(
    "/findings/{finding_id}/timeline",
    tags=["enforcement"],
    response_model=list[StepOut],
    summary=N_("A finding's enforcement timeline"),
    description="Found, reviewed, alerted, notice sent (with the relay's answer), delisting "
    "requested, re-checked: oldest first.",
    responses=errors(404),
)
def get_finding_timeline(request: Request, user: Viewer, finding_id: str) -> list[StepOut]:
    ctx = app_context(request)
    found = stored_finding(ctx, finding_id, {"_id": 1})
    return [StepOut(**asdict(s), label=s.label) for s in finding_timeline(ctx, found["_id"])]


@router.get(
    "/funnel",
    tags=["enforcement"],
    response_model=list[FunnelRowOut],
    summary=N_("The enforcement funnel"),
    description="Per domain or per work, most copies first: found → confirmed → notified → "
    "removed, the median days to removal, the copies still there after the deadline.",
    responses=errors(),
)
def get_funnel(request: Request, user: Viewer, by: FunnelBy = DEFAULT_BY) -> list[FunnelRowOut]:
    rows = funnel(app_context(request), by.value, catalogue=app_catalogue(request))
    return [FunnelRowOut(**row.as_dict()) for row in rows]
