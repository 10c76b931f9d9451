"""The API's operations on the library: list, get, edit and delete works (adding them is
``POST /works`` in ``admin.routes.api``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import HTTPException, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from tracker.index import MAX_MASTER_ID
from tracker.masters.library import library_page
from tracker.scanning.library_edits import delete_work as delete_master_work
from tracker.scanning.library_edits import edit_work as edit_master_work

from ..i18n import N_
from ..security import Admin, Reviewer, Viewer, app_context
from ..web import MAX_PAGE
from .api_base import (
    PREFIX,
    Invalid,
    MasterText,
    Strict,
    WorkResultStatus,
    api_router,
    errors,
    example,
    too_large,
)

router = api_router(PREFIX)
MasterId = Annotated[int, Path(ge=0, le=MAX_MASTER_ID, description=N_("The work's master id"))]
_WORK_EXAMPLE = {
    "master_id": 17,
    "work_id": "news-2024-0001",
    "chapter_of": None,
    "title": "夏粮再获丰收",
    "author": "新华社",
    "lang": "zh",
    "kind": "news",
    "source": "api",
    "chars": 1936,
    "updated_at": "2024-06-01T08:00:00Z",
}


class WorkOut(BaseModel):
    model_config = example(**_WORK_EXAMPLE)

    master_id: int
    work_id: str = Field(description=N_("Your id for it (for a chapter: the work's id, then #n)"))
    chapter_of: str | None = Field(description=N_("The long work this is a chapter of"))
    title: str | None
    author: str | None
    lang: str | None
    kind: str | None
    source: str | None = Field(description=N_("api, upload:FILE, a file's path…"))
    chars: int = Field(description=N_("Characters of its text"))
    updated_at: datetime | None


class WorkDetailOut(WorkOut):
    model_config = example(**_WORK_EXAMPLE, text="据新华社报道，今年夏粮再获丰收……", findings=3)

    text: str
    findings: int = Field(description=N_("Pages found copying it"))


class WorkList(BaseModel):
    total: int = Field(description=N_("Works in the library (or matching q)"))
    page: int
    pages: int
    per_page: int
    items: list[WorkOut] = Field(description=N_("Newest first"))


class WorkEditIn(Strict):
    model_config = example(title="夏粮再获丰收（修订）", author="新华社记者")

    title: str | None = Field(None, max_length=500, description=N_('"" clears it'))
    author: str | None = Field(None, max_length=200, description=N_('"" clears it'))
    text: MasterText | None = Field(
        None, description=N_("A new text: the pages that copied the work are scanned again")
    )


class WorkEditOut(BaseModel):
    work: WorkOut
    text_status: WorkResultStatus | None = Field(
        description=N_(
            "unchanged, updated or duplicate (the text of another work: not "
            "changed); null when no text was sent"
        )
    )
    detail: str = Field(description=N_("Why a text was not changed"))
    rescanned: int = Field(description=N_("Pages scanned again with the new text"))
    still_copied: int = Field(description=N_("Of those, how many still copy the work"))


class WorkDeletedOut(BaseModel):
    work_id: str
    findings_deleted: int = Field(description=N_("Findings nobody had decided on, deleted with it"))
    findings_kept: int = Field(description=N_("Reviewed findings, kept as records"))


def _work_out(master: dict[str, Any]) -> WorkOut:
    chapter_of = master.get("work_id")
    return WorkOut(
        master_id=master["_id"],
        work_id=master["external_id"],
        chapter_of=chapter_of if chapter_of != master["external_id"] else None,
        title=master.get("title"),
        author=master.get("author"),
        lang=master.get("lang"),
        kind=master.get("kind"),
        source=master.get("source"),
        chars=master.get("chars") or 0,
        updated_at=master.get("updated_at"),
    )


def _master(request: Request, master_id: int, fields: dict[str, int] | None) -> dict[str, Any]:
    master = app_context(request).db.masters.find_one({"_id": master_id}, fields)
    if master is None:
        raise HTTPException(404, f"no work #{master_id} in the library")
    return master


@router.get(
    "/works",
    tags=["works"],
    response_model=WorkList,
    summary=N_("List the library's works"),
    responses=errors(),
)
def list_works(
    request: Request,
    user: Viewer,
    q: Annotated[
        str, Query(max_length=200, description=N_("Words in the id, title or author"))
    ] = "",
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> WorkList:
    found = library_page(app_context(request), page, per_page, q.strip())
    return WorkList(
        total=found.total,
        page=found.page,
        pages=found.pages,
        per_page=per_page,
        items=[_work_out(master) for master in found.masters],
    )


@router.get(
    "/works/{master_id}",
    tags=["works"],
    response_model=WorkDetailOut,
    summary=N_("One work, with its text"),
    responses=errors(404, e404="No such work"),
)
def get_work(request: Request, user: Viewer, master_id: MasterId) -> WorkDetailOut:
    master = _master(request, master_id, None)
    findings = app_context(request).db.findings.count_documents({"master_id": master_id})
    return WorkDetailOut(**_work_out(master).model_dump(), text=master["text"], findings=findings)


@router.patch(
    "/works/{master_id}",
    tags=["works"],
    response_model=WorkEditOut,
    summary=N_("Change a work's title, author or text"),
    responses=errors(
        400,
        404,
        413,
        e400="The body is not JSON",
        e404="No such work",
        e413=too_large("/works", "a title, an author and a text"),
        e422="The request does not match this document, or the text cannot be a work's",
    ),
)
def edit_work(request: Request, user: Reviewer, master_id: MasterId, body: WorkEditIn) -> Any:
    ctx = app_context(request)
    _master(request, master_id, {"_id": 1})
    try:
        result = edit_master_work(
            ctx, master_id, title=body.title, author=body.author, text=body.text
        )
    except LookupError as err:  # deleted meanwhile
        raise HTTPException(404, str(err)) from None
    except ValueError as err:
        return JSONResponse(Invalid(detail=[f"text: {err}"]).model_dump(), status_code=422)
    return WorkEditOut(
        work=_work_out(_master(request, master_id, {"text": 0})),
        text_status=result.text.status if result.text else None,
        detail=result.text.detail if result.text else "",
        rescanned=result.rescanned,
        still_copied=result.still_copied,
    )


@router.delete(
    "/works/{master_id}",
    tags=["works"],
    response_model=WorkDeletedOut,
    summary=N_("Delete a work"),
    description="Out of the library and the index; the findings reviewers decided on are "
    "kept as records. Admins only.",
    responses=errors(404, e404="No such work"),
)
def delete_work(request: Request, user: Admin, master_id: MasterId) -> WorkDeletedOut:
    try:
        result = delete_master_work(app_context(request), master_id, user.name)
    except LookupError:
        raise HTTPException(404, f"no work #{master_id} in the library") from None
    return WorkDeletedOut(
        work_id=result.external_id,
        findings_deleted=result.findings_deleted,
        findings_kept=result.findings_kept,
    )
