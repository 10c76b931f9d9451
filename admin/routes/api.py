"""The JSON API for integrations, under /api/v1, with its OpenAPI schema.

Authenticate with ``Authorization: Bearer <token>`` (``copytrack token create`` or the
Account page). A browser session works too, with the ``X-CSRF-Token`` header on writes.
Errors are ``{"detail": "..."}`` with the status each operation documents; a request that
does not match this document gets 422 with ``{"detail": ["field: problem", ...]}``.
Within /api/v1 fields and operations may be added; none is removed, renamed or given
another meaning, and no accepted request starts being refused (that needs /api/v2).
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import HTTPException, Query, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel, Field

from tracker.campaigns import ACTIVE_STATES, DONE_STATES, CampaignBusy, CampaignError, NotRunning
from tracker.campaigns import stop_run as stop_campaign_run
from tracker.findings import (
    DISMISS_REASONS,
    NOTICE_STAGES,
    OUTCOME_LABELS,
    REVIEWER_STATUSES,
    SIZES,
    SORT_KEYS,
    STATUSES,
    find_findings,
    parse_filter,
    set_status,
)
from tracker.findings.queries import MAX_DOMAIN_CHARS, MAX_SEARCH_CHARS
from tracker.masters.library import Work
from tracker.masters.loaders import Loaded
from tracker.matching.matcher import match_text
from tracker.monitoring.health import health

from .. import campaigns as campaign_seam
from ..i18n import N_
from ..limits import body_cap
from ..security import Admin, Reviewer, Viewer, app_catalogue, app_context
from ..web import MAX_PAGE, render
from . import api_enforcement, api_notices, api_subscriptions, api_works
from .api_base import (
    PREFIX,
    Invalid,
    Strict,
    WorkResultStatus,
    WorkText,
    api_router,
    errors,
    example,
    finding_id_of,
    named_enum,
    stored_finding,
    too_large,
    workflow_refusals,
)
from .works import register

router = api_router(PREFIX)
MAX_TEXT_CHARS = 2_000_000
#: ``status``: one status, or several separated by commas.
_ONE_STATUS = "|".join(STATUSES)
STATUS_LIST_PATTERN = f"^ *(?:{_ONE_STATUS}) *(?:, *(?:{_ONE_STATUS}) *)*$"


RUN_STATES = (*ACTIVE_STATES, "scanning", *DONE_STATES)
# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    FindingStatus = StrEnum
    RunState = StrEnum
    FindingSort = StrEnum
    CheckOutcome = StrEnum
    RunHealth = StrEnum
else:
    FindingStatus = named_enum(
        "FindingStatus", N_("Where a finding stands in the review."), STATUSES
    )
    RunState = named_enum(
        "RunState",
        N_("(queued →) starting → running → scanning → finished, or failed, or cancelled."),
        RUN_STATES,
    )
    #: ``-key`` sorts descending; each value named ``key_desc`` in a generated client.
    FindingSort = named_enum(
        "FindingSort",
        N_("How a findings list is ordered: a key, or -key for the reverse (largest first)."),
        {name: value for base in SORT_KEYS
         for name, value in ((base, base), (f"{base}_desc", f"-{base}"))},
    )  # fmt: skip
    CheckOutcome = named_enum(
        "CheckOutcome",
        N_("What fetching a noticed page again found."),
        tuple(OUTCOME_LABELS),
    )
    RunHealth = named_enum(
        "RunHealth",
        N_("error: the run failed or fetched nothing; warning: most URLs failed; ok otherwise."),
        ("ok", "warning", "error"),
    )
DEFAULT_SORT = FindingSort("-last_seen")


class CheckIn(Strict):
    model_config = example(text="据新华社报道，今年夏粮再获丰收，全国夏粮总产量达到新的水平。")

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description=N_("The suspect text."))


class PassageOut(BaseModel):
    work_start: int
    work_end: int
    text_start: int
    text_end: int
    text: str = Field(description=N_("The passage as it appears in the checked text."))


class MatchOut(BaseModel):
    work_id: str
    master_id: int
    title: str | None
    score: float
    hits: int
    work_coverage: float = Field(description=N_("Fraction of the work found in the text."))
    text_coverage: float = Field(description=N_("Fraction of the text copied from the work."))
    copied_chars: int = Field(description=N_("Characters of the work in the matched passages."))
    passages: list[PassageOut]


class CheckOut(BaseModel):
    matches: list[MatchOut]


class WorkIn(Strict):
    id: str | None = Field(None, max_length=200, description=N_("Your id; default: text hash."))
    text: WorkText
    title: str | None = Field(None, max_length=500)
    author: str | None = Field(None, max_length=200)
    lang: str | None = Field(None, max_length=20)
    kind: str | None = Field(None, max_length=50)
    source: str | None = Field(None, max_length=500)


MAX_WORKS = 1000  # a batch: more go in further requests


class WorksIn(Strict):
    model_config = example(
        works=[
            {
                "id": "news-2024-0001",
                "title": "夏粮再获丰收",
                "author": "新华社",
                "lang": "zh",
                "kind": "news",
                "text": "据新华社报道，今年夏粮再获丰收，全国夏粮总产量达到新的水平，"
                "各地抢抓农时，机收进度快于往年。",
            }
        ]
    )

    works: list[WorkIn] = Field(min_length=1, max_length=MAX_WORKS)


class WorkResult(BaseModel):
    work_id: str
    master_id: int
    status: WorkResultStatus
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
    outcome: CheckOutcome = Field(description=N_("What fetching the page again found"))
    by: str
    settled: bool = Field(description=N_("Fetched after the deadline: the answer to the notice"))
    detail: str | None = None


class FindingOut(BaseModel):
    model_config = example(
        id="665f1c2ab3e4d5f6a7b8c9d0",
        status="confirmed",
        work_id="news-2024-0001",
        master_id=17,
        work_title="夏粮再获丰收",
        url="https://pirate.example/news/1046.html",
        domain="pirate.example",
        site="pirate.example",
        campaign="pirate-sites",
        score=0.93,
        hits=41,
        work_coverage=0.95,
        page_coverage=0.62,
        copied_chars=1840,
        first_seen="2024-06-03T03:12:09Z",
        last_seen="2024-06-10T03:10:44Z",
        page_id="665f1c29b3e4d5f6a7b8c9cf",
    )

    id: str
    status: FindingStatus
    work_id: str
    master_id: int
    work_title: str | None
    url: str
    domain: str
    site: str = Field(description=N_("Host and port, when the URL names a port"))
    campaign: str | None
    score: float
    hits: int
    work_coverage: float
    page_coverage: float
    copied_chars: int | None = Field(
        None, description=N_("Characters of the work copied (none for findings of old scans)")
    )
    quotation: bool = Field(
        False, description=N_("Quotation-sized: out of the review queue unless size= asks for it")
    )
    first_seen: datetime
    last_seen: datetime
    page_id: str
    dismiss_reason: str | None = None
    notice_deadline: datetime | None = Field(None, description=N_("The latest notice's deadline"))
    notice_check: NoticeCheckOut | None = None
    history: list[HistoryOut] | None = None


class FindingList(BaseModel):
    total: int
    page: int
    per_page: int
    items: list[FindingOut]


# mypy takes no enum made from values at run time for a type: to it, each is a StrEnum.
if TYPE_CHECKING:
    ReviewStatus = StrEnum
    DismissReason = StrEnum
    NoticeStage = StrEnum
    FindingSize = StrEnum
else:
    #: What a reviewer may set (``licensed`` comes from the whitelist only); see TRANSITIONS.
    ReviewStatus = named_enum(
        "ReviewStatus",
        N_("A status a reviewer may set (licensed comes from the licensed domains only)."),
        REVIEWER_STATUSES,
    )
    DismissReason = named_enum(
        "DismissReason", N_("Why a finding was dismissed."), tuple(DISMISS_REASONS)
    )
    NoticeStage = named_enum(
        "NoticeStage", N_("Where a finding's takedown notice stands."), NOTICE_STAGES
    )
    FindingSize = named_enum(
        "FindingSize",
        N_("Copies (the review queue), quotation-sized findings (under 200 characters), or any."),
        SIZES,
    )
COPIES = FindingSize("copies")


class StatusIn(Strict):
    model_config = example(status="dismissed", note="licensed reprint", reason="licensed")

    status: ReviewStatus
    note: str | None = Field(None, max_length=2000)
    reason: DismissReason | None = Field(None, description=N_("Why, when dismissing"))


class CancelledOut(BaseModel):
    by: str = Field(description=N_("Who stopped the run"))
    at: datetime


class RunOut(BaseModel):
    model_config = example(
        id="665f1c2ab3e4d5f6a7b8c9aa",
        campaign="pirate-sites",
        state="finished",
        trigger="schedule",
        started_at="2024-06-10T03:00:00Z",
        finished_at="2024-06-10T03:11:52Z",
        figures={"fetched": 128, "changed": 12, "skipped": 3, "failed": 1, "new findings": 4},
        health="ok",
        health_message="128 fetched; 1 failed",
        skipped={"robots": 3},
        failed={"http_404": 1},
    )

    id: str
    campaign: str
    state: RunState
    trigger: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    cancelled: CancelledOut | None = Field(None, description=N_("Who stopped the run, and when"))
    figures: dict[str, int] = Field(description=N_("pages fetched, changed, skipped, failed, …"))
    error: str | None = None
    health: RunHealth = Field(
        description=N_("error: the run failed or fetched nothing; warning: most URLs failed")
    )
    health_message: str = Field(description=N_("why, naming the main reason"))
    skipped: dict[str, int] = Field(description=N_("URLs skipped, by reason"))
    failed: dict[str, int] = Field(description=N_("URLs that failed, by reason (dns, http_404, …)"))


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
    ok: bool = Field(description=N_("MongoDB and Redis both answer; the index is the library's."))
    checked_at: datetime
    servers: dict[str, ServerHealthOut] = Field(description=N_("mongo and redis."))
    index: IndexHealthOut | None = Field(
        description=N_("Whether the index in Redis is the library's (null: a server is down).")
    )
    queues: dict[str, int] | None = Field(description=N_("Tasks waiting per queue."))
    in_progress: int | None = Field(description=N_("Tasks delivered, not yet acknowledged."))
    workers: list[str] | None = Field(description=N_("Celery workers that answered a ping."))
    last_scan_at: datetime | None
    scans_overdue: int | None = Field(
        default=None,
        description=N_("Pages stored over two visibility timeouts ago and not scanned since."),
    )
    compiled_loops: dict[str, bool] = Field(
        default_factory=dict,
        description=N_(
            "Whether each compiled loop loads in the admin's process (false: its "
            "numpy fallback runs, several times slower)."
        ),
    )
    problems: list[str] = Field(description=N_("One sentence each; empty when all is well."))


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
        quotation=bool(doc.get("quotation")),
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
        state=run["state"],
        trigger=run.get("trigger"),
        started_at=run.get("started_at"),
        finished_at=run.get("finished_at"),
        cancelled=run.get("cancelled"),
        figures=progress["figures"],
        error=run.get("error"),
        health=progress["health"]["level"],
        health_message=progress["health"]["message"],
        skipped=progress["counts"]["skipped"],
        failed=progress["counts"]["failed"],
    )


@router.post(
    "/check",
    tags=["check"],
    response_model=CheckOut,
    summary=N_("Which works does a text copy?"),
    description=f"The body: at most {body_cap(PREFIX + '/check') // 2**20} MB of JSON.",
    responses=errors(
        400, 413, e400="The body is not JSON", e413=too_large("/check", "a text to check")
    ),
)
def check_text(request: Request, user: Viewer, body: CheckIn) -> CheckOut:
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
    tags=["works"],
    response_model=WorksOut,
    status_code=201,
    summary=N_("Register works in the library"),
    description=(
        f"At most {MAX_WORKS:,} works and {body_cap(PREFIX + '/works') // 2**20} MB of JSON "
        "a request: send a larger library in several."
    ),
    responses=errors(
        400,
        413,
        e400="The body is not JSON",
        e413=too_large("/works", f"{MAX_WORKS:,} works"),
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
    tags=["findings"],
    response_model=FindingList,
    summary=N_("List and filter findings"),
    responses=errors(400),
)
def list_findings(
    request: Request,
    user: Viewer,
    status: Annotated[
        str | None,
        Query(description=N_("One status, or several with commas"), pattern=STATUS_LIST_PATTERN),
    ] = None,
    work: Annotated[str | None, Query(description=N_("External id, master id or work id"))] = None,
    q: Annotated[
        str | None,
        Query(
            max_length=MAX_SEARCH_CHARS,
            description=N_("Words in the work's title or id, the page's title or URL"),
        ),
    ] = None,
    domain: Annotated[
        str | None, Query(max_length=MAX_DOMAIN_CHARS, description=N_("Also matches subdomains"))
    ] = None,
    campaign: str | None = None,
    min_score: Annotated[float | None, Query(ge=0, le=1)] = None,
    max_score: Annotated[float | None, Query(ge=0, le=1)] = None,
    min_copied: Annotated[
        int | None, Query(ge=0, le=10**9, description=N_("At least this many characters copied"))
    ] = None,
    max_copied: Annotated[
        int | None,
        Query(ge=0, le=10**9, description=N_("At most this many: quotation-sized excerpts")),
    ] = None,
    since: Annotated[date | None, Query(description=N_("First seen on or after this day"))] = None,
    until: Annotated[date | None, Query(description=N_("First seen on or before this day"))] = None,
    notice: Annotated[
        NoticeStage | None, Query(description=N_("Where the findings' takedown notices stand"))
    ] = None,
    size: Annotated[
        FindingSize, Query(description=N_("Copies only (the default), quotation-sized, or any"))
    ] = COPIES,
    sort: Annotated[FindingSort, Query()] = DEFAULT_SORT,
    page: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 1,
    per_page: Annotated[int, Query(ge=1, le=200)] = 50,
) -> FindingList:
    # The declared parameters document the API; parse_filter reads them like the pages do.
    flt = parse_filter(request.query_params)
    result = find_findings(app_context(request), flt, page, per_page, app_catalogue(request))
    return FindingList(
        total=result.total,
        page=result.page,
        per_page=result.per_page,
        items=[_finding_out(doc) for doc in result.items],
    )


@router.get(
    "/findings/{finding_id}",
    tags=["findings"],
    response_model=FindingOut,
    summary=N_("One finding"),
    responses=errors(404),
)
def get_finding(request: Request, user: Viewer, finding_id: str) -> FindingOut:
    return _finding_out(stored_finding(app_context(request), finding_id), with_history=True)


@router.patch(
    "/findings/{finding_id}",
    tags=["findings"],
    response_model=FindingOut,
    summary=N_("Change a finding's status"),
    responses=errors(
        400,
        404,
        409,
        413,
        e400="The body is not JSON",
        e409="The workflow does not allow this change",
        e413=too_large("/findings", "a status, a note and a reason"),
    ),
)
def update_finding(request: Request, user: Reviewer, finding_id: str, body: StatusIn) -> FindingOut:
    with workflow_refusals():
        doc = set_status(
            app_context(request),
            finding_id_of(finding_id),
            body.status.value,
            user.name,
            body.note,
            body.reason.value if body.reason else None,
        )
    return _finding_out(doc, with_history=True)


@router.get(
    "/campaigns",
    tags=["campaigns"],
    response_model=list[CampaignOut],
    summary=N_("List campaigns"),
    responses=errors(),
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
    tags=["campaigns"],
    response_model=list[RunOut],
    summary=N_("Run history"),
    responses=errors(404),
)
def list_runs(request: Request, user: Viewer, name: str) -> list[RunOut]:
    ctx = app_context(request)
    if campaign_seam.get(ctx, name) is None:
        raise HTTPException(404, f"no campaign {name!r}")
    return [_run_out(run) for run in campaign_seam.history(ctx, name, limit=100)]


@router.post(
    "/campaigns/{name}/runs",
    tags=["campaigns"],
    response_model=TriggerOut,
    status_code=202,
    summary=N_("Start a run now"),
    responses=errors(404, 409, e409="The campaign is running already"),
)
def run_campaign(request: Request, user: Admin, name: str) -> TriggerOut:
    try:
        run_id = campaign_seam.trigger(app_context(request), name)
    except LookupError as err:
        raise HTTPException(404, str(err)) from None
    except CampaignBusy as err:
        raise HTTPException(409, str(err)) from None
    except OSError as err:
        raise HTTPException(503, f"cannot start the crawl: {err}") from None
    return TriggerOut(campaign=name, run_id=str(run_id))


@router.post(
    "/campaigns/{name}/stop",
    tags=["campaigns"],
    response_model=RunOut,
    summary=N_("Stop the campaign's run under way"),
    description="The run is recorded cancelled, with who stopped it and when; its crawl "
    "ends after the requests under way, and the campaign can run again at once.",
    responses=errors(404, 409, e409="No run of the campaign is under way"),
)
def stop_campaign(request: Request, user: Admin, name: str) -> RunOut:
    try:
        run = stop_campaign_run(app_context(request), name, user.name)
    except NotRunning as err:
        raise HTTPException(409, str(err)) from None
    except CampaignError as err:
        raise HTTPException(404, str(err)) from None
    return _run_out(run)


@router.get(
    "/health",
    tags=["health"],
    response_model=HealthOut,
    summary=N_("Servers, queues, workers and the last scan"),
    description="Any token may read it: monitoring needs no admin's rights.",
    responses=errors(),
)
def get_health(request: Request, user: Viewer) -> dict[str, Any]:
    # About a second: it waits that long for the workers to answer a ping.
    return health(app_context(request))


#: Every router of the API (``admin.app`` includes each), in the document's order.
ROUTERS = (
    router,
    api_works.router,
    api_notices.router,
    api_enforcement.router,
    api_subscriptions.router,
)


def openapi_schema() -> dict[str, Any]:
    """The API's OpenAPI document (the web pages are not part of it)."""
    schema = get_openapi(
        title="copytrack API",
        version="1",
        description=__doc__,
        routes=[route for api_router in ROUTERS for route in api_router.routes],
    )
    schema["components"]["securitySchemes"] = {"token": {"type": "http", "scheme": "bearer"}}
    schema["security"] = [{"token": []}]
    return schema


@router.get("/openapi.json", include_in_schema=False)
def openapi() -> dict[str, Any]:
    """Public (``admin.security.PUBLIC_ROUTES``): it describes the API, it discloses nothing."""
    return openapi_schema()


@router.get("/docs", include_in_schema=False)
def docs(request: Request, user: Viewer) -> HTMLResponse:
    """A readable API reference, rendered here (no documentation scripts from a CDN)."""
    return render(request, "api_docs.html", schema=openapi_schema())
