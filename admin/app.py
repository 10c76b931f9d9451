"""The FastAPI application: routers, the authentication gate, error pages, static files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pymongo.errors import ConnectionFailure
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.routing import Match

from tracker.context import Context, process_context, reconnected
from tracker.core.failures import describe
from tracker.findings import Catalogue, FilterError, MongoFindings
from tracker.masters.durability import NotDurable
from tracker.masters.generation import IndexNotReady
from tracker.monitoring.health import index_health, server_health
from tracker.runtime.servers import ServerStartError
from tracker.scanning.rechecks import PageFetcher

from .bulk_jobs import BulkJobs
from .i18n import LanguageMiddleware, _
from .limits import BodyGuard
from .report_pdfs import ReportPdfs
from .routes import (
    account,
    api,
    campaigns,
    check,
    dashboard,
    enforcement,
    evidence,
    exports,
    findings,
    operators,
    settings,
    works,
)
from .security import (
    CataloguePreparing,
    Forbidden,
    LoginRequired,
    SecurityHeaders,
    SessionStore,
    gate,
    resolve_auth,
)
from .web import STATIC_DIR, plain_problem, redirect, render


def _wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def _error(request: Request, status: int, message: str, **headers: str) -> Response:
    if _wants_json(request):
        return JSONResponse({"detail": message}, status_code=status, headers=headers)
    response = render(request, "error.html", status_code=status, status=status, message=message)
    response.headers.update(headers)
    return response


def _allowed_methods(app: FastAPI, request: Request) -> str:
    """Every method the path answers: Starlette's 405 names only those of the first route
    on the path, while each method of a path is a route of its own."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(request.scope)
        if match is not Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return ", ".join(sorted(methods))


def _install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(LoginRequired)
    async def login_required(request: Request, _: Exception) -> Response:
        if _wants_json(request):
            return JSONResponse(
                {"detail": "authentication required: send 'Authorization: Bearer <token>'"},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return redirect("/login?next=" + quote(target, safe=""))

    @app.exception_handler(Forbidden)
    async def forbidden(request: Request, err: Exception) -> Response:
        return _error(request, 403, str(err))

    @app.exception_handler(CataloguePreparing)
    async def preparing(request: Request, err: CataloguePreparing) -> Response:
        message = _(
            "The findings list is being prepared (%(num)s findings read so far); "
            "try again in a moment."
        ) % {"num": f"{err.rows:,}"}
        if _wants_json(request):
            return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "2"})
        response = render(request, "preparing.html", status_code=503, message=message)
        response.headers["Retry-After"] = "2"
        return response

    @app.exception_handler(FilterError)
    async def bad_filter(request: Request, err: Exception) -> Response:
        return _error(request, 400, str(err))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, err: RequestValidationError) -> Response:
        problems = [
            f"{'.'.join(str(p) for p in e['loc'] if p != 'body') or 'request'}: {e['msg']}"
            for e in err.errors()
        ]
        if _wants_json(request):
            return JSONResponse({"detail": problems}, status_code=422)
        return _error(request, 400, " ".join(plain_problem(e) for e in err.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, err: StarletteHTTPException) -> Response:
        headers = dict(err.headers or {})
        if err.status_code == 405:
            headers["Allow"] = _allowed_methods(app, request)
        if not _wants_json(request) and getattr(request.state, "auth", None) is None:
            # No route matched, so the gate did not run: a signed-in reviewer who mistyped
            # an address still gets the menu to go on from.
            request.state.auth = await run_in_threadpool(resolve_auth, request)
        return _error(request, err.status_code, str(err.detail), **headers)

    @app.exception_handler(redis.ConnectionError)
    @app.exception_handler(redis.TimeoutError)
    @app.exception_handler(ConnectionFailure)
    async def server_down(request: Request, err: Exception) -> Response:
        # An embedded server that died comes back (on its port if it is free): the next
        # request works.
        state = request.app.state
        message = describe(err, state.ctx.settings) or str(err)
        try:
            ctx = await run_in_threadpool(reconnected, state.ctx)
        except ServerStartError as start_error:
            message = str(start_error)
        else:
            if ctx is not state.ctx:
                state.ctx, state.sessions = ctx, SessionStore(ctx)
        return _error(request, 503, f"{message}; try again in a moment", **{"Retry-After": "5"})

    @app.exception_handler(IndexNotReady)
    @app.exception_handler(NotDurable)  # works not stored: their postings are not on disk
    async def index_not_ready(request: Request, err: Exception) -> Response:
        return _error(request, 503, str(err))


def create_app(ctx: Context | None = None, fetch_page: PageFetcher | None = None) -> FastAPI:
    """The admin app on ``ctx`` (default: this process's context, opened on first use).

    ``fetch_page`` (the crawler's, which the admin cannot import) lets reviewers check a
    page by its URL and re-check a noticed page now; without it they check texts only and
    re-checks wait for the scheduler."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # A served admin answers at once: the catalogue loads while the first pages say
        # so (without a server, as in tests' clients, the first request loads it).
        app.state.catalogue.load_in_background()
        yield
        app.state.report_pdfs.close()  # its child process goes with the admin

    app = FastAPI(
        title="copytrack admin",
        lifespan=lifespan,
        # The JSON API's schema and reference are served by the api router, behind the gate;
        # FastAPI's own docs pages would load their scripts from a CDN.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        dependencies=[Depends(gate)],
    )
    app.state.ctx = ctx or process_context()
    app.state.fetch_page = fetch_page
    app.state.sessions = SessionStore(app.state.ctx)
    # Lists, counts and searches of findings, loaded on first use and kept in step.
    app.state.catalogue = Catalogue(MongoFindings(lambda: app.state.ctx.db))
    # Long domain reports' PDFs, built in a thread while the admin answers.
    app.state.report_pdfs = ReportPdfs(lambda: app.state.ctx)
    # Changes of very many findings, run in a thread a batch at a time.
    app.state.bulk_jobs = BulkJobs(lambda: app.state.ctx)
    app.add_middleware(BodyGuard)  # innermost: its refusals get the security headers too
    app.add_middleware(LanguageMiddleware)  # every page, message and PDF in its language
    app.add_middleware(GZipMiddleware, minimum_size=2048, compresslevel=6)
    app.add_middleware(SecurityHeaders)
    _install_error_handlers(app)

    @app.get("/healthz", include_in_schema=False)
    def healthz() -> JSONResponse:
        """For load balancers: 200 while MongoDB and Redis store and read back a record and
        the index is the library's, 503 otherwise.

        Answers without a session, so it says nothing more (any token gets the full report at
        /api/v1/health), and skips the slow worker ping: the admin serves without workers.
        """
        ctx = app.state.ctx
        ok = all(server["ok"] for server in server_health(ctx).values())
        ok = ok and index_health(ctx)["ok"]
        return JSONResponse(
            {"ok": ok}, status_code=200 if ok else 503, headers={"Cache-Control": "no-store"}
        )

    for module in (account, dashboard, findings, check, works, campaigns, exports, settings, api):
        app.include_router(module.router)
    for api_router in api.ROUTERS[1:]:  # api.router above: its pages before theirs
        app.include_router(api_router)
    app.include_router(evidence.router)
    app.include_router(operators.router)
    app.include_router(enforcement.router)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app
