"""The JSON API for integrations, under /api/v1, with its OpenAPI schema.

Authenticate with ``Authorization: Bearer <token>`` (``copytrack token create`` or the
Account page). A browser session works too, with the ``X-CSRF-Token`` header on writes.
Errors are ``{"detail": "..."}`` with the status each operation documents; a request that
does not match this document gets 422 with ``{"detail": ["field: problem", ...]}``.
Within /api/v1 fields and operations may be added; none is removed, renamed or given
another meaning, and no accepted request starts being refused (that needs /api/v2).
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from fingerprinter import DEFAULT_PARAMS
from fingerprinter.initials import common_letters_class
from tracker.campaigns import CampaignBusy
from tracker.findings import (
    DISMISS_REASONS,
    NOTICE_STAGES,
    OUTCOME_LABELS,
    REVIEWER_STATUSES,
    SORT_KEYS,
    STATUSES,
    FindingNotFound,
    WorkflowError,
    find_findings,
    parse_filter,
    parse_object_id,
    set_status,
)
from tracker.findings.queries import MAX_DOMAIN_CHARS, MAX_SEARCH_CHARS
from tracker.health import health
from tracker.library import Work
from tracker.loaders import Loaded
from tracker.matcher import match_text

from .. import campaigns as campaign_seam
from ..limits import BoundedJsonRoute, body_cap
from ..security import Admin, Reviewer, Viewer, app_context
from ..web import MAX_PAGE, render
from .works import register

PREFIX = "/api/v1"
router = APIRouter(prefix=PREFIX, tags=["api"], route_class=BoundedJsonRoute)
MAX_TEXT_CHARS = 2_000_000
#: A work's text must hold enough letters to fingerprint (the library's own rule, stated
#: with the characters that always count): the schema says it, the server checks it.
MIN_LETTERS = DEFAULT_PARAMS.granule
_LETTER = common_letters_class()
WORK_TEXT_PATTERN = f"^(?:[^{_LETTER[1:-1]}]*{_LETTER}){{{MIN_LETTERS}}}"
_ENOUGH_LETTERS = re.compile(WORK_TEXT_PATTERN)
#: ``status``: one status, or several separated by commas.
_ONE_STATUS = "|".join(STATUSES)
STATUS_LIST_PATTERN = f"^ *(?:{_ONE_STATUS}) *(?:, *(?:{_ONE_STATUS}) *)*$"
SortKey = Literal[tuple(key for base in SORT_KEYS for key in (base, f"-{base}"))]  # type: ignore[valid-type]


class Problem(BaseModel):
    """The body of every error but 422."""

    detail: str = Field(description="What went wrong, and what to do about it.")


class Invalid(BaseModel):
    """The body of 422: the request does not match this document."""

    detail: list[str] = Field(description="One line per problem: where, then what.")


_ERRORS: dict[int, tuple[type[BaseModel], str]] = {
    400: (Problem, "A filter value the server cannot use, or a body that is not JSON"),
    401: (Problem, "No token, or one that is unknown, expired or revoked"),
    403: (Problem, "The token's role may not do this (or a session write lacks X-CSRF-Token)"),
    404: (Problem, "No such finding or campaign"),
    409: (Problem, "The current state does not allow it"),
    413: (Problem, "The body is larger than the operation takes, or holds more JSON values"),
    422: (Invalid, "The request does not match this document"),
    503: (Problem, "A server does not answer or the index is not ready: retry after Retry-After"),
}


def errors(*codes: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """The error responses of an operation: 401, 403, 422 and 503 on every one, ``codes``
    besides; ``described`` (``e409="..."``) words a code for this operation."""
    out: dict[int | str, dict[str, Any]] = {}
    for code in sorted({401, 403, 422, 503, *codes}):
        model, description = _ERRORS[code]
        out[code] = {"model": model, "description": described.get(f"e{code}", description)}
    return out


def _enough_letters(text: str) -> str:
    if not _ENOUGH_LETTERS.search(text):
        raise ValueError(
            f"too few letters to fingerprint: give at least {MIN_LETTERS} Chinese "
            "characters or ASCII letters"
        )
    return text


class Strict(BaseModel):
    """Request bodies refuse unknown fields, so a typo is an error, not silently ignored."""

    model_config = ConfigDict(extra="forbid")


class CheckIn(Strict):
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The suspect text.")


class PassageOut(BaseModel):
    work_start: int
    work_end: int
    text_start: int
    text_end: int
    text: str = Field(description="The passage as it appears in the checked text.")


class MatchOut(BaseModel):
    work_id: str
    master_id: int
    title: str | None
    score: float
    hits: int
    work_coverage: float = Field(description="Fraction of the work found in the text.")
    text_coverage: float = Field(description="Fraction of the text copied from the work.")
    copied_chars: int = Field(description="Characters of the work in the matched passages.")
    passages: list[PassageOut]


class CheckOut(BaseModel):
    matches: list[MatchOut]


class WorkIn(Strict):
    id: str | None = Field(None, max_length=200, description="Your id; default: text hash.")
    text: Annotated[
        str,
        AfterValidator(_enough_letters),
        Field(
            max_length=20_000_000,
            description=f"At least {MIN_LETTERS} Chinese characters or ASCII letters.",
            json_schema_extra={"pattern": WORK_TEXT_PATTERN},
        ),
    ]
    title: str | None = Field(None, max_length=500)
    author: str | None = Field(None, max_length=200)
    lang: str | None = Field(None, max_length=20)
    kind: str | None = Field(None, max_length=50)
    source: str | None = Field(None, max_length=500)


MAX_WORKS = 1000  # a batch: more go in further requests


class WorksIn(Strict):
    works: list[WorkIn] = Field(min_length=1, max_length=MAX_WORKS)


class WorkResult(BaseModel):
    work_id: str
    master_id: int
    status: str = Field(description="added, unchanged, updated or duplicate")
    detail: str


class WorksOut(BaseModel):
    results: list[WorkResult]
    errors: list[str]


class HistoryOut(BaseModel):
    at: datetime
    status: str
    by: str
    note: str | None = None
    reason: str | None = None


class NoticeCheckOut(BaseModel):
    at: datetime
    outcome: Literal[tuple(OUTCOME_LABELS)] = Field(  # type: ignore[valid-type]
        description="What fetching the page again found"
    )
    by: str
    settled: bool = Field(description="Fetched after the deadline: the answer to the notice")
    detail: str | None = None


class FindingOut(BaseModel):
    id: str
    status: str
    work_id: str
    master_id: int
    work_title: str | None
    url: str
    domain: str
    site: str = Field(description="Host and port, when the URL names a port")
    campaign: str | None
    score: float
    hits: int
    work_coverage: float
    page_coverage: float
    copied_chars: int | None = Field(
        None, description="Characters of the work copied (none for findings of old scans)"
    )
    first_seen: datetime
    last_seen: datetime
    page_id: str
    dismiss_reason: str | None = None
    notice_deadline: datetime | None = Field(None, description="The latest notice's deadline")
    notice_check: NoticeCheckOut | None = None
    history: list[HistoryOut] | None = None


class FindingList(BaseModel):
    total: int
    page: int
    per_page: int
    items: list[FindingOut]


#: What a reviewer may set (``licensed`` comes from the whitelist only); see TRANSITIONS.
ReviewStatus = Literal[REVIEWER_STATUSES]  # type: ignore[valid-type]
DismissReason = Literal[tuple(DISMISS_REASONS)]  # type: ignore[valid-type]
NoticeStage = Literal[NOTICE_STAGES]  # type: ignore[valid-type]


class StatusIn(Strict):
    status: ReviewStatus
    note: str | None = Field(None, max_length=2000)
    reason: DismissReason | None = Field(None, description="Why, when dismissing")


class RunOut(BaseModel):
    id: str
    campaign: str
    state: str = Field(description="queued, starting, running, scanning, finished or failed")
    trigger: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    figures: dict[str, int] = Field(description="pages fetched, changed, skipped, failed, …")
    error: str | None = None
    health: Literal["ok", "warning", "error"] = Field(
        description="error: the run failed or fetched nothing; warning: most URLs failed"
    )
    health_message: str = Field(description="why, naming the main reason")
    skipped: dict[str, int] = Field(description="URLs skipped, by reason")
    failed: dict[str, int] = Field(description="URLs that failed, by reason (dns, http_404, …)")


class CampaignOut(BaseModel):
    name: str
    seeds: list[str]
    allowed_domains: list[str]
    allow: list[str]
    deny: list[str]
    max_pages: int | None
    max_depth: int | None
    schedule: str | None
    enabled: bool
    notes: str
    last_run: RunOut | None


class TriggerOut(BaseModel):
    campaign: str
    run_id: str


class ServerHealthOut(BaseModel):
    ok: bool
    latency_ms: float | None = None
    error: str | None = None


class IndexHealthOut(BaseModel):
    ok: bool
    postings: int | None = None
    library_postings: int | None = None
    error: str | None = None
    warning: str | None = None


class HealthOut(BaseModel):
    ok: bool = Field(description="MongoDB and Redis both answer; the index is the library's.")
    checked_at: datetime
    servers: dict[str, ServerHealthOut] = Field(description="mongo and redis.")
    index: IndexHealthOut | None = Field(
        description="Whether the index in Redis is the library's (null: a server is down)."
    )
    queues: dict[str, int] | None = Field(description="Tasks waiting per queue.")
    in_progress: int | None = Field(description="Tasks delivered, not yet acknowledged.")
    workers: list[str] | None = Field(description="Celery workers that answered a ping.")
    last_scan_at: datetime | None
    scans_overdue: int | None = Field(
        default=None,
        description="Pages stored over two visibility timeouts ago and not scanned since.",
    )
    compiled_loops: dict[str, bool] = Field(
        default_factory=dict,
        description="Whether each compiled loop loads in the admin's process (false: its "
        "numpy fallback runs, several times slower).",
    )
    problems: list[str] = Field(description="One sentence each; empty when all is well.")


def _finding_out(doc: dict[str, Any], with_history: bool = False) -> FindingOut:
    history = None
    if with_history:
        history = [HistoryOut(**{**h, "at": h["at"]}) for h in doc.get("history", [])]
    return FindingOut(
        id=str(doc["_id"]),
        status=doc["status"],
        work_id=doc["master_external_id"],
        master_id=doc["master_id"],
        work_title=doc.get("master_title"),
        url=doc["url"],
        domain=doc["domain"],
        site=doc.get("site") or doc["domain"],
        campaign=doc.get("campaign"),
        score=doc["score"],
        hits=doc["hits"],
        work_coverage=doc["master_coverage"],
        page_coverage=doc["suspect_coverage"],
        copied_chars=doc.get("copied_chars"),
        first_seen=doc["first_seen"],
        last_seen=doc["last_seen"],
        page_id=str(doc["page_id"]),
        dismiss_reason=doc.get("dismiss_reason"),
        notice_deadline=doc.get("notice_deadline"),
        notice_check=doc.get("notice_check"),
        history=history,
    )


def _run_out(run: dict[str, Any]) -> RunOut:
    progress = campaign_seam.progress(run)
    return RunOut(
        id=str(run["_id"]),
        campaign=run["campaign"],
        state=run.get("state", "unknown"),
        trigger=run.get("trigger"),
        started_at=run.get("started_at"),
        finished_at=run.get("finished_at"),
        figures=progress["figures"],
        error=run.get("error"),
        health=progress["health"]["level"],
        health_message=progress["health"]["message"],
        skipped=progress["counts"]["skipped"],
        failed=progress["counts"]["failed"],
    )


def _too_large(path: str, what: str) -> str:
    return f"The body is over {body_cap(PREFIX + path) // 2**20} MB, or holds more than {what}"


@router.post(
    "/check",
    response_model=CheckOut,
    summary="Which works does a text copy?",
    description=f"The body: at most {body_cap(PREFIX + '/check') // 2**20} MB of JSON.",
    responses=errors(
        400, 413, e400="The body is not JSON", e413=_too_large("/check", "a text to check")
    ),
)
def check(request: Request, user: Viewer, body: CheckIn) -> CheckOut:
    matches = match_text(app_context(request), body.text)
    return CheckOut(
        matches=[
            MatchOut(
                work_id=m.master.external_id,
                master_id=m.master.id,
                title=m.master.title,
                score=m.score,
                hits=m.hits,
                work_coverage=m.master_coverage,
                text_coverage=m.suspect_coverage,
                copied_chars=m.copied_chars,
                passages=[
                    PassageOut(
                        work_start=s.master_start,
                        work_end=s.master_end,
                        text_start=s.suspect_start,
                        text_end=s.suspect_end,
                        text=body.text[s.suspect_start : s.suspect_end],
                    )
                    for s in m.spans
                ],
            )
            for m in matches
        ]
    )


@router.post(
    "/works",
    response_model=WorksOut,
    status_code=201,
    summary="Register works in the library",
    description=(
        f"At most {MAX_WORKS:,} works and {body_cap(PREFIX + '/works') // 2**20} MB of JSON "
        "a request: send a larger library in several."
    ),
    responses=errors(
        400,
        413,
        e400="The body is not JSON",
        e413=_too_large("/works", f"{MAX_WORKS:,} works"),
        e422="The request does not match this document, or no work went in",
    ),
)
def add_works(request: Request, user: Reviewer, body: WorksIn) -> Any:
    works = [
        Loaded(
            w.id or f"works[{n}]",
            Work(
                text=w.text,
                external_id=w.id,
                title=w.title,
                author=w.author,
                lang=w.lang,
                kind=w.kind,
                source=w.source or "api",
            ),
        )
        for n, w in enumerate(body.works)
    ]
    intake = register(app_context(request), works)
    out = WorksOut(
        results=[
            WorkResult(
                work_id=r.external_id, master_id=r.master_id, status=r.status, detail=r.detail
            )
            for r, _ in intake.results
        ],
        errors=intake.errors,
    )
    if not out.results:
        return JSONResponse(Invalid(detail=out.errors).model_dump(), status_code=422)
    return out


@router.get(
    "/findings",
    response_model=FindingList,
    summary="List and filter findings",
    responses=errors(400),
)
def list_findings(
    request: Request,
    user: Viewer,
    status: Annotated[
        str | None,
        Query(description="One status, or several with commas", pattern=STATUS_LIST_PATTERN),
    ] = None,
    work: Annotated[str | None, Query(description="External id, master id or work id")] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=MAX_SEARCH_CHARS,
            description="Words in the work's title or id, the page's title or URL",
        ),
    ] = None,
    domain: Annotated[
        str | None, Query(max_length=MAX_DOMAIN_CHARS, description="Also matches subdomains")
    ] = None,
    campaign: str | None = None,
    min_score: Annotated[float | None, Query(ge=0, le=1)] = None,
    max_score: Annotated[float | None, Query(ge=0, le=1)] = None,
    min_copied: Annotated[
        int | None, Query(ge=0, le=10**9, description="At least this many characters copied")
    ] = None,
    max_copied: Annotated[
        int | None,
        Query(ge=0, le=10**9, description="At most this many: quotation-sized excerpts"),
    ] = None,
    since: Annotated[date | None, Query(description="First seen on or after this day")] = None,
    until: Annotated[date | None, Query(description="First seen on or before this day")] = None,
    notice: Annotated[
        NoticeStage | None, Query(description="Where the findings' takedown notices stand")
    ] = None,
    sort: Annotated[SortKey, Query(description="-key sorts in reverse")] = "-last_seen",
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> FindingList:
    # The declared parameters document the API; parse_filter reads them like the pages do.
    result = find_findings(app_context(request), parse_filter(request.query_params), page, per_page)
    return FindingList(
        total=result.total,
        page=result.page,
        per_page=result.per_page,
        items=[_finding_out(doc) for doc in result.items],
    )


def _finding_id(value: str) -> Any:
    try:
        return parse_object_id(value)
    except ValueError as err:
        raise HTTPException(404, str(err)) from None


@router.get(
    "/findings/{finding_id}",
    response_model=FindingOut,
    summary="One finding",
    responses=errors(404),
)
def get_finding(request: Request, user: Viewer, finding_id: str) -> FindingOut:
    doc = app_context(request).db.findings.find_one({"_id": _finding_id(finding_id)})
    if doc is None:
        raise HTTPException(404, f"no finding {finding_id}")
    return _finding_out(doc, with_history=True)


@router.patch(
    "/findings/{finding_id}",
    response_model=FindingOut,
    summary="Change a finding's status",
    responses=errors(
        400,
        404,
        409,
        413,
        e400="The body is not JSON",
        e409="The workflow does not allow this change",
        e413=_too_large("/findings", "a status, a note and a reason"),
    ),
)
def update_finding(request: Request, user: Reviewer, finding_id: str, body: StatusIn) -> FindingOut:
    try:
        doc = set_status(
            app_context(request),
            _finding_id(finding_id),
            body.status,
            user.name,
            body.note,
            body.reason,
        )
    except FindingNotFound as err:
        raise HTTPException(404, str(err)) from None
    except WorkflowError as err:
        raise HTTPException(409, str(err)) from None
    return _finding_out(doc, with_history=True)


@router.get(
    "/campaigns", response_model=list[CampaignOut], summary="List campaigns", responses=errors()
)
def list_campaigns(request: Request, user: Viewer) -> list[CampaignOut]:
    return [
        CampaignOut(
            **{k: v for k, v in campaign.to_doc().items() if k in CampaignOut.model_fields},
            last_run=_run_out(last) if last else None,
        )
        for campaign, last in campaign_seam.overview(app_context(request))
    ]


@router.get(
    "/campaigns/{name}/runs",
    response_model=list[RunOut],
    summary="Run history",
    responses=errors(404),
)
def campaign_runs(request: Request, user: Viewer, name: str) -> list[RunOut]:
    ctx = app_context(request)
    if campaign_seam.get(ctx, name) is None:
        raise HTTPException(404, f"no campaign {name!r}")
    return [_run_out(run) for run in campaign_seam.history(ctx, name, limit=100)]


@router.post(
    "/campaigns/{name}/runs",
    response_model=TriggerOut,
    status_code=202,
    summary="Start a run now",
    responses=errors(404, 409, e409="The campaign is running already"),
)
def trigger_run(request: Request, user: Admin, name: str) -> TriggerOut:
    try:
        run_id = campaign_seam.trigger(app_context(request), name)
    except LookupError as err:
        raise HTTPException(404, str(err)) from None
    except CampaignBusy as err:
        raise HTTPException(409, str(err)) from None
    except OSError as err:
        raise HTTPException(503, f"cannot start the crawl: {err}") from None
    return TriggerOut(campaign=name, run_id=str(run_id))


@router.get(
    "/health",
    response_model=HealthOut,
    summary="Servers, queues, workers and the last scan",
    responses=errors(),
)
def health_report(request: Request, user: Admin) -> dict[str, Any]:
    # About a second: it waits that long for the workers to answer a ping.
    return health(app_context(request))


def openapi_schema() -> dict[str, Any]:
    """The API's OpenAPI document (the web pages are not part of it)."""
    schema = get_openapi(
        title="copytrack API",
        version="1",
        description=__doc__,
        routes=router.routes,
    )
    schema["components"]["securitySchemes"] = {"token": {"type": "http", "scheme": "bearer"}}
    schema["security"] = [{"token": []}]
    return schema


@router.get("/openapi.json", include_in_schema=False)
def openapi(user: Viewer) -> dict[str, Any]:
    return openapi_schema()


@router.get("/docs", include_in_schema=False)
def docs(request: Request, user: Viewer) -> HTMLResponse:
    """A readable API reference, rendered here (no documentation scripts from a CDN)."""
    return render(request, "api_docs.html", schema=openapi_schema())
