"""The API's operations on a finding's enforcement: takedown notices (draft, record, list)
and its evidence report (PDF)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from tracker.core.times import now
from tracker.findings import (
    NOTICE_DEADLINE_DAYS,
    NOTICE_LANGUAGES,
    FindingNotFound,
    build_notice,
    evidence,
    notices_of,
    record_notice,
    working_days_after,
)

from ..evidence_report import evidence_pdf
from ..i18n import N_
from ..security import Reviewer, Viewer, app_context
from ..web import download
from .api_base import (
    PREFIX,
    Strict,
    api_router,
    errors,
    example,
    finding_id_of,
    named_enum,
    stored_finding,
    too_large,
    workflow_refusals,
)

router = api_router(PREFIX)
# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    NoticeLanguage = StrEnum
else:
    NoticeLanguage = named_enum(
        "NoticeLanguage", N_("The language of a notice's template."), NOTICE_LANGUAGES
    )
DEFAULT_LANGUAGE = NoticeLanguage("zh")
_NOTICE = {
    "lang": "en",
    "subject": 'Copyright infringement notice: "Summer grain harvest" at pirate.example',
    "body": "To the operator of pirate.example:\n\nPeople's Daily Press owns the copyright…",
}


class NoticeDraftOut(BaseModel):
    model_config = example(
        finding_id="665f1c2ab3e4d5f6a7b8c9d0", **_NOTICE, passages=4, deadline="2024-06-17"
    )

    finding_id: str
    lang: NoticeLanguage
    subject: str
    body: str = Field(description=N_("The notice's text, signed by the sender set in Settings"))
    passages: int = Field(description=N_("Matching passages the notice counts"))
    deadline: date = Field(
        description=f"The removal deadline it would get: {NOTICE_DEADLINE_DAYS} working days"
    )


class NoticeIn(Strict):
    model_config = example(**_NOTICE, recipient="abuse@pirate.example", deadline="2030-06-17")

    lang: NoticeLanguage
    subject: str = Field(min_length=1, max_length=500)
    body: str = Field(min_length=1, max_length=100_000, pattern=r"\S")
    recipient: str = Field(
        min_length=1,
        max_length=500,
        pattern=r"\S",
        description=N_("Where it went: an e-mail address or the site's form"),
    )
    deadline: date | None = Field(
        None,
        description=f"The day the copy should be gone by (a day to come; default "
        f"{NOTICE_DEADLINE_DAYS} working days from now)",
    )


class NoticeOut(BaseModel):
    model_config = example(
        id="665f1c2ab3e4d5f6a7b8c9e1",
        finding_id="665f1c2ab3e4d5f6a7b8c9d0",
        **_NOTICE,
        sha256="9f2c1e0d4b6a8c7e5f3d1b9a7c5e3f1d9b7a5c3e1f9d7b5a3c1e9f7d5b3a1c9e",
        recipient="abuse@pirate.example",
        by="rui",
        sent_at="2024-06-10T09:30:00Z",
        deadline="2024-06-17T23:59:59Z",
    )

    id: str
    finding_id: str
    lang: str
    subject: str
    body: str = Field(description=N_("The text as sent"))
    sha256: str = Field(description=N_("SHA-256 of the body (UTF-8)"))
    recipient: str
    by: str
    sent_at: datetime
    deadline: datetime


def _notice_out(doc: dict[str, Any]) -> NoticeOut:
    fields = {name: doc[name] for name in NoticeOut.model_fields if name in doc}
    return NoticeOut(**{**fields, "id": str(doc["_id"]), "finding_id": str(doc["finding_id"])})


@router.get(
    "/findings/{finding_id}/notice-draft",
    tags=["notices"],
    response_model=NoticeDraftOut,
    summary=N_("Draft a takedown notice"),
    description="The notice as the admin drafts it for a confirmed finding; nothing is "
    "recorded. Send it, then record it.",
    responses=errors(
        404, 409, e409="The finding is not confirmed, or Settings name no notice sender"
    ),
)
def draft_notice(
    request: Request, user: Reviewer, finding_id: str, lang: NoticeLanguage = DEFAULT_LANGUAGE
) -> NoticeDraftOut:
    with workflow_refusals():
        notice = build_notice(app_context(request), finding_id_of(finding_id), lang.value)
    return NoticeDraftOut(
        finding_id=finding_id,
        lang=lang,
        subject=notice.subject,
        body=notice.body,
        passages=len(notice.passages),
        deadline=working_days_after(now(), NOTICE_DEADLINE_DAYS).date(),
    )


@router.post(
    "/findings/{finding_id}/notices",
    tags=["notices"],
    response_model=NoticeOut,
    status_code=201,
    name="record_notice",
    summary=N_("Record a notice sent"),
    description="The finding becomes notice_sent; its page is re-checked after the deadline.",
    responses=errors(
        400,
        404,
        409,
        413,
        e400="The body is not JSON",
        e409="The finding is not confirmed, the deadline has passed, or Settings name no "
        "notice sender",
        e413=too_large("/findings", "a notice"),
    ),
)
def record_sent_notice(
    request: Request, user: Reviewer, finding_id: str, body: NoticeIn
) -> NoticeOut:
    with workflow_refusals():
        record = record_notice(
            app_context(request),
            finding_id_of(finding_id),
            lang=body.lang.value,
            subject=body.subject,
            body=body.body,
            recipient=body.recipient,
            by=user.name,
            # The end of the day given, in UTC (as the admin's form records it).
            deadline=datetime.combine(body.deadline, time.max, tzinfo=UTC)
            if body.deadline
            else None,
        )
    return _notice_out(record)


@router.get(
    "/findings/{finding_id}/notices",
    tags=["notices"],
    response_model=list[NoticeOut],
    summary=N_("The notices sent for a finding"),
    description="Newest first.",
    responses=errors(404),
)
def list_notices(request: Request, user: Viewer, finding_id: str) -> list[NoticeOut]:
    ctx = app_context(request)
    found = stored_finding(ctx, finding_id, {"_id": 1})
    return [_notice_out(doc) for doc in notices_of(ctx, found["_id"])]


@router.get(
    "/findings/{finding_id}/evidence.pdf",
    tags=["evidence"],
    response_class=Response,
    summary=N_("A finding's evidence report (PDF)"),
    description="For a legal team: the work and the copy compared, the capture's hashes "
    "and time-stamp, the review's history; the capture travels attached to the PDF.",
    responses={
        200: {
            "content": {"application/pdf": {"schema": {"type": "string", "format": "binary"}}},
            "description": "The report",
        },
        **errors(404),
    },
)
def get_evidence_report(request: Request, user: Viewer, finding_id: str) -> Response:
    ctx = app_context(request)
    try:
        found = evidence(ctx, finding_id_of(finding_id))
    except FindingNotFound as err:
        raise HTTPException(404, str(err)) from None
    return download(evidence_pdf(ctx, found), "application/pdf",
                    f"copytrack-evidence-{finding_id}.pdf")  # fmt: skip
