"""Who is asking, and may they: sessions, API tokens, CSRF, roles, security headers.

* A session is a random id in an HttpOnly, SameSite=Lax cookie; its data (user, CSRF
  token, flash messages) lives in Redis under the id's SHA-256, so a copy of Redis holds
  no usable cookie. Sessions expire after ``SESSION_IDLE_S`` idle and ``SESSION_MAX_S``
  in all; changing a user's password or removing the user ends its sessions.
* Integrations send ``Authorization: Bearer <token>`` (see ``tracker.accounts.users``); a token
  request carries no cookie, so it needs no CSRF token. Tokens act within their role but
  never reach account, token or user management, which need a session (and, to create a
  token, the password again).
* Every state-changing request made with a session must carry the session's CSRF token,
  in the form field ``csrf_token`` or the ``X-CSRF-Token`` header. The login form, which
  has no session yet, uses a double-submit cookie instead. Pages carry either token masked
  afresh in every response (`masked_token`), never as it is.
* ``gate`` runs before every route (an app-wide dependency): nothing but ``PUBLIC_ROUTES``
  answers without a session or a token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.accounts.users import Principal, get_user, verify_token
from tracker.context import Context
from tracker.findings import Catalogue

SESSION_COOKIE = "copytrack_session"
LOGIN_CSRF_COOKIE = "copytrack_login_csrf"
# Browsers keep a __Host- cookie only if it is Secure, has path / and no Domain: no other
# host (a sibling subdomain) and no plain-HTTP page can set or replace it.
SECURE_COOKIE_PREFIX = "__Host-"
SESSION_IDLE_S = 8 * 3600
SESSION_MAX_S = 24 * 3600
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Route paths that answer without a session or token (static assets are a separate mount).
#: The API's OpenAPI document describes the operations; it discloses no data.
PUBLIC_ROUTES = frozenset({"/login", "/healthz", "/language", "/api/v1/openapi.json"})

#: The app's pages: scripts and styles only from our own files, no inline script, handler
#: or style anywhere.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; font-src 'self'; connect-src 'self'; frame-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: A captured page shown as evidence: sandboxed (no scripts, forms, popups, same-origin
#: rights), nothing fetched from anywhere (no tracking pixel tells the pirate we looked);
#: form-action and base-uri do not fall back to default-src. The marked copy has its
#: fetching elements taken out besides (admin.evidence): Chromium connects for a frame
#: even when frame-src forbids it.
EVIDENCE_CSP = (
    "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-src 'none'; child-src 'none'; object-src 'none'; media-src 'none'; "
    "font-src 'none'; manifest-src 'none'; form-action 'none'; base-uri 'none'; "
    "frame-ancestors 'self'"
)


class LoginRequired(Exception):
    """No valid session or token: pages redirect to the login form, the API answers 401."""


class Forbidden(Exception):
    """Authenticated, but the role or the CSRF token does not allow this request."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Session:
    """A logged-in browser: its cookie id and its data in Redis."""

    sid: str
    data: dict[str, Any]

    @property
    def csrf(self) -> str:
        return self.data["csrf"]


class SessionStore:
    """Sessions in Redis, so every admin process sees the same ones."""

    def __init__(self, ctx: Context) -> None:
        self.redis = ctx.redis
        self.keys = ctx.keys

    def _key(self, sid: str) -> str:
        return self.keys.session(hashlib.sha256(sid.encode()).hexdigest())

    def create(self, principal: Principal) -> Session:
        """A new session (a fresh id at every login: no session fixation)."""
        data = {
            "user": principal.name,
            "epoch": principal.session_epoch,
            "csrf": secrets.token_urlsafe(32),
            "created": time.time(),
            "flash": [],
        }
        session = Session(secrets.token_urlsafe(32), data)
        self.save(session)
        return session

    def load(self, sid: str) -> Session | None:
        """The session of a cookie value, or None when unknown or expired."""
        raw = self.redis.get(self._key(sid))
        if raw is None:
            return None
        data = json.loads(raw)
        if time.time() - data["created"] > SESSION_MAX_S:
            self.delete(sid)
            return None
        self.redis.expire(self._key(sid), SESSION_IDLE_S)
        return Session(sid, data)

    def save(self, session: Session) -> None:
        self.redis.set(self._key(session.sid), json.dumps(session.data), ex=SESSION_IDLE_S)

    def delete(self, sid: str) -> None:
        self.redis.delete(self._key(sid))


@dataclass
class Auth:
    """The authenticated side of a request: a principal, and its session if it has one."""

    principal: Principal
    session: Session | None = None


def app_context(request: Request) -> Context:
    """The tracker Context of the app serving this request."""
    return request.app.state.ctx


#: How long a request waits for the findings catalogue's first load before it answers
#: that the list is being prepared: a small installation's load never shows that.
PREPARING_WAIT_S = 0.5


class CataloguePreparing(Exception):
    """The findings catalogue is still loading (the admin just started): ``rows`` read."""

    def __init__(self, rows: int) -> None:
        super().__init__(rows)
        self.rows = rows


def app_catalogue(request: Request) -> Catalogue:
    """The findings catalogue of the app serving this request (lists, counts, search).
    Raises `CataloguePreparing` while its first load runs in the background."""
    catalogue: Catalogue = request.app.state.catalogue
    if catalogue.preparing(PREPARING_WAIT_S):
        raise CataloguePreparing(catalogue.rows_read)
    return catalogue


def cookie_name(request: Request, name: str) -> str:
    """The name ``name`` has in this installation: ``__Host-`` prefixed with
    COPYTRACK_SECURE_COOKIES."""
    return SECURE_COOKIE_PREFIX + name if app_context(request).settings.secure_cookies else name


def cookies_secure(request: Request) -> bool:
    """Whether cookies get ``Secure``: always with COPYTRACK_SECURE_COOKIES, else when the
    request came over HTTPS (directly, or through a proxy in COPYTRACK_TRUSTED_PROXIES)."""
    return app_context(request).settings.secure_cookies or request.url.scheme == "https"


def resolve_auth(request: Request) -> Auth | None:
    """The session or API token of a request, from its headers alone; None if neither is
    valid."""
    ctx = app_context(request)
    header = request.headers.get("authorization", "")
    if header:
        scheme, _, token = header.partition(" ")
        principal = verify_token(ctx, token) if scheme.lower() == "bearer" else None
        return Auth(principal) if principal else None
    sid = request.cookies.get(cookie_name(request, SESSION_COOKIE))
    if not sid:
        return None
    store: SessionStore = request.app.state.sessions
    session = store.load(sid)
    if session is None:
        return None
    user = get_user(ctx, session.data["user"])
    # A removed user, or one whose password changed since this login, has no session.
    if user is None or user.get("session_epoch", 0) != session.data["epoch"]:
        store.delete(sid)
        return None
    principal = Principal(user["_id"], user["role"], session_epoch=session.data["epoch"])
    return Auth(principal, session)


async def gate(request: Request) -> Auth | None:
    """Run before every route: authenticate, and check CSRF on state-changing requests."""
    route = request.scope.get("route")
    if getattr(route, "path", None) in PUBLIC_ROUTES:
        return None
    # BodyGuard resolved it already for requests with a body (before reading the body).
    auth = getattr(request.state, "auth", None) or await run_in_threadpool(resolve_auth, request)
    if auth is None:
        raise LoginRequired
    if request.method not in SAFE_METHODS and auth.session is not None:
        sent: str | UploadFile | None = request.headers.get(CSRF_HEADER)
        if sent is None:
            # Parsed once and cached by Starlette, so the route still gets its form fields.
            try:
                sent = (await request.form()).get(CSRF_FIELD)
            except ClientDisconnect:  # BodyGuard refused the body (a role's, a cap's): done
                raise Forbidden("the request was refused") from None
        if not isinstance(sent, str) or not token_matches(sent, auth.session.csrf):
            raise Forbidden("the form expired or did not come from this site: reload and retry")
    request.state.auth = auth
    return auth


def masked_token(secret: str) -> str:
    """A CSRF token as one response carries it: XORed with a fresh random pad, the pad in
    front. A compressed page that also reflects the request's input (a search) never holds
    the same token twice, so its compressed size tells nothing about it (BREACH)."""
    plain = secret.encode()
    pad = secrets.token_bytes(len(plain))
    return base64.urlsafe_b64encode(pad + _xor(pad, plain)).decode()


def token_matches(sent: str, secret: str) -> bool:
    """Whether ``sent`` is a masked form of ``secret`` (see `masked_token`)."""
    try:
        both = base64.urlsafe_b64decode(sent.encode("ascii"))
    except (ValueError, UnicodeEncodeError):
        return False
    half = len(both) // 2
    if not half or len(both) != 2 * half:
        return False
    return hmac.compare_digest(_xor(both[:half], both[half:]), secret.encode())


def _xor(pad: bytes, data: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(pad, data, strict=True))


def refusal(auth: Auth, role: str, session_only: bool = False) -> str | None:
    """Why ``auth`` may not use a route that needs ``role`` (and, with ``session_only``, a
    signed-in browser session); None when it may."""
    if session_only and auth.session is None:
        return (
            "accounts, tokens and users are managed only when signed in to the admin "
            "in a browser, not with an API token"
        )
    if not auth.principal.can(role):
        return f"this needs the {role} role; you are {auth.principal.role}"
    return None


def _needs(role: str, session_only: bool = False) -> Callable[[Auth | None], Principal]:
    """A dependency that lets only principals with at least ``role`` through; with
    ``session_only``, only signed-in browser sessions, never an API token."""

    def dependency(auth: Annotated[Auth | None, Depends(gate)]) -> Principal:
        if auth is None:  # a public route asking for a user is a programming error
            raise LoginRequired
        reason = refusal(auth, role, session_only)
        if reason is not None:
            raise Forbidden(reason)
        return auth.principal

    dependency.__name__ = f"needs_{role}{'_session' if session_only else ''}"
    # What the route needs, readable before the request's body is (admin.limits).
    dependency.needs = (role, session_only)  # type: ignore[attr-defined]  # a function's own
    return dependency


def route_needs(route: Any) -> tuple[str, bool] | None:
    """The role (and whether only a session will do) that ``route`` asks for, from its
    dependencies; None for a public route."""
    pending = list(getattr(getattr(route, "dependant", None), "dependencies", ()))
    while pending:
        dependency = pending.pop()
        if hasattr(dependency.call, "needs"):
            return dependency.call.needs
        pending += dependency.dependencies
    return None


Viewer = Annotated[Principal, Depends(_needs("viewer"))]
Reviewer = Annotated[Principal, Depends(_needs("reviewer"))]
Admin = Annotated[Principal, Depends(_needs("admin"))]
# Who may change credentials: a leaked integration token must never mint, revoke or reset
# them, whatever its role, so these routes need a session.
AccountOwner = Annotated[Principal, Depends(_needs("viewer", session_only=True))]
UserAdmin = Annotated[Principal, Depends(_needs("admin", session_only=True))]


def session_of(request: Request) -> Session | None:
    """The request's session (None for token requests and public routes)."""
    auth: Auth | None = getattr(request.state, "auth", None)
    return auth.session if auth else None


def flash(request: Request, message: str, kind: str = "ok") -> None:
    """Show ``message`` on the next page this browser renders."""
    session = session_of(request)
    if session is not None:
        session.data.setdefault("flash", []).append({"kind": kind, "text": message})
        request.app.state.sessions.save(session)


def pop_flashes(request: Request) -> list[dict[str, str]]:
    session = session_of(request)
    if session is None or not session.data.get("flash"):
        return []
    messages, session.data["flash"] = session.data["flash"], []
    request.app.state.sessions.save(session)
    return messages


def client_address(request: Request) -> str:
    """The client's address (the admin binds to loopback or sits behind one trusted proxy)."""
    return request.client.host if request.client else "unknown"


def safe_next(target: str | None) -> str:
    """A post-login redirect target on this site only (no open redirect)."""
    if target and target.startswith("/") and not target.startswith(("//", "/\\")):
        return target
    return "/"


class SecurityHeaders:
    """ASGI middleware: CSP and friends on every response that does not set its own."""

    HEADERS = (
        (b"content-security-policy", PAGE_CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"x-frame-options", b"DENY"),
        (b"referrer-policy", b"same-origin"),
        (b"cross-origin-opener-policy", b"same-origin"),
        (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
    )

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(k, v) for k, v in self.HEADERS if k not in present]
                if not static and b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))  # reviewers' data
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
