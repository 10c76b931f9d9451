"""Logging in and out, and a user's own account: password and API tokens."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, Response

from tracker.accounts.users import (
    ROLES,
    LoginThrottle,
    Principal,
    UserError,
    create_token,
    get_user,
    list_tokens,
    revoke_token,
    set_password,
    set_time_zone,
    verify_password,
)

from ..i18n import COOKIE as LANGUAGE_COOKIE
from ..i18n import LANGUAGES, _
from ..security import (
    LOGIN_CSRF_COOKIE,
    SESSION_COOKIE,
    AccountOwner,
    LoginRequired,
    Viewer,
    app_context,
    client_address,
    cookie_name,
    cookies_secure,
    flash,
    masked_token,
    safe_next,
    session_of,
    token_matches,
)
from ..web import redirect, render

router = APIRouter(include_in_schema=False)
THROTTLE = LoginThrottle()


def _set_cookie(request: Request, response: Response, name: str, value: str) -> None:
    response.set_cookie(
        cookie_name(request, name),
        value,
        httponly=True,
        samesite="lax",
        secure=cookies_secure(request),
        path="/",
    )


def _forget_cookie(request: Request, response: Response, name: str) -> None:
    # A __Host- cookie can only be cleared with the same attributes it was set with.
    response.delete_cookie(
        cookie_name(request, name),
        path="/",
        secure=cookies_secure(request),
        httponly=True,
        samesite="lax",
    )


def _login_page(
    request: Request, next_url: str, error: str | None = None, status_code: int = 200
) -> HTMLResponse:
    # Double-submit token: the login form has no session to hold a CSRF token yet.
    token = request.cookies.get(cookie_name(request, LOGIN_CSRF_COOKIE)) or secrets.token_urlsafe(
        32
    )
    response = render(
        request,
        "login.html",
        status_code=status_code,
        login_csrf=masked_token(token),
        next_url=next_url,
        error=error,
    )
    _set_cookie(request, response, LOGIN_CSRF_COOKIE, token)
    return response


@router.get("/language")
def choose_language(request: Request, lang: str = "", next: str = "/") -> Response:
    """The language switch: remembered for a year in this browser (before or after login)."""
    response = redirect(safe_next(next))
    if lang in LANGUAGES:
        response.set_cookie(LANGUAGE_COOKIE, lang, max_age=365 * 86400, samesite="lax",
                            secure=cookies_secure(request), path="/")  # fmt: skip
    return response


@router.get("/login")
def login_form(request: Request, next: str = "/") -> HTMLResponse:
    return _login_page(request, safe_next(next))


@router.post("/login")
def login(
    request: Request,
    name: Annotated[str, Form(max_length=64)],
    password: Annotated[str, Form(max_length=1024)],
    csrf_token: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "/",
) -> Response:
    next_url = safe_next(next)
    cookie = request.cookies.get(cookie_name(request, LOGIN_CSRF_COOKIE), "")
    if not cookie or not token_matches(csrf_token, cookie):
        return _login_page(request, next_url, "The form expired: please try again.", 403)
    ctx, client = app_context(request), client_address(request)
    wait = THROTTLE.attempt(ctx, client, name)
    if wait:
        return _wait(_login_page(request, next_url, _too_many(wait), 429), wait)
    principal = verify_password(ctx, name, password)
    if principal is None:  # the attempt stays counted
        return _login_page(request, next_url, _("Wrong user name or password."), 401)
    THROTTLE.succeeded(ctx, client, name)
    return _start_session(request, principal, next_url)


def _too_many(wait: int) -> str:
    if wait < 120:
        return _("Too many failed attempts. Try again in %(num)s seconds.") % {"num": wait}
    return _("Too many failed attempts. Try again in %(num)s minutes.") % {"num": wait // 60}


def _wait(response: HTMLResponse, wait: int) -> HTMLResponse:
    response.headers["Retry-After"] = str(wait)
    return response


def _password_again(
    request: Request, user: Principal, password: str, wrong: str
) -> HTMLResponse | None:
    """None when ``password`` is the signed-in user's; else the account page saying
    ``wrong``, or, after too many wrong ones, how long to wait (429). Counted in the login
    throttle like logins: a session is no way round it."""
    ctx, client = app_context(request), client_address(request)
    wait = THROTTLE.attempt(ctx, client, user.name)
    if wait:
        return _wait(_account_page(request, user, error=_too_many(wait), status_code=429), wait)
    if verify_password(ctx, user.name, password) is None:  # the attempt stays counted
        return _account_page(request, user, error=wrong)
    THROTTLE.succeeded(ctx, client, user.name)
    return None


def _start_session(
    request: Request, principal: Principal, next_url: str, message: str | None = None
) -> Response:
    sessions = request.app.state.sessions
    session = sessions.create(principal)
    if message:
        session.data["flash"].append({"kind": "ok", "text": message})
        sessions.save(session)
    response = redirect(next_url)
    _set_cookie(request, response, SESSION_COOKIE, session.sid)
    _forget_cookie(request, response, LOGIN_CSRF_COOKIE)
    return response


@router.post("/logout")
def logout(request: Request, user: Viewer) -> Response:
    session = session_of(request)
    if session is not None:
        request.app.state.sessions.delete(session.sid)
    response = redirect("/login")
    _forget_cookie(request, response, SESSION_COOKIE)
    return response


#: Zones offered first (any IANA name is taken): the newsrooms copytrack serves.
COMMON_ZONES = ("UTC", "Asia/Shanghai", "Asia/Hong_Kong", "Asia/Taipei", "Asia/Singapore",
                "Asia/Tokyo", "Europe/London", "Europe/Berlin", "America/New_York",
                "America/Los_Angeles")  # fmt: skip


def _account_page(
    request: Request,
    user: Principal,
    new_token: str | None = None,
    error: str | None = None,
    status_code: int | None = None,
) -> HTMLResponse:
    return render(
        request,
        "account.html",
        status_code=status_code or (400 if error else 200),
        tokens=list_tokens(app_context(request), user.name),
        roles=[r for r in ROLES if user.can(r)],
        new_token=new_token,
        error=error,
        time_zone=(get_user(app_context(request), user.name) or {}).get("time_zone") or "",
        installation_zone=app_context(request).settings.time_zone,
        zones=COMMON_ZONES,
    )


@router.get("/account")
def account(request: Request, user: AccountOwner) -> HTMLResponse:
    return _account_page(request, user)


@router.post("/account/time-zone")
def change_time_zone(
    request: Request,
    user: AccountOwner,
    time_zone: Annotated[str, Form(max_length=64)] = "",
) -> Response:
    try:
        set_time_zone(app_context(request), user.name, time_zone.strip() or None)
    except UserError as err:
        return _account_page(request, user, error=str(err))
    flash(request, _("Times are now shown in %(zone)s.")
          % {"zone": time_zone.strip() or app_context(request).settings.time_zone})  # fmt: skip
    return redirect("/account")


@router.post("/account/password")
def change_password(
    request: Request,
    user: AccountOwner,
    current: Annotated[str, Form(max_length=1024)],
    password: Annotated[str, Form(max_length=1024)],
    repeat: Annotated[str, Form(max_length=1024)],
) -> Response:
    ctx = app_context(request)
    refused = _password_again(request, user, current, _("The current password is wrong."))
    if refused is not None:
        return refused
    if password != repeat:
        return _account_page(request, user, error=_("The two new passwords differ."))
    try:
        set_password(ctx, user.name, password)
    except UserError as err:
        return _account_page(request, user, error=str(err))
    # Changing the password ended every session, this one too: start a fresh one here.
    session = session_of(request)
    if session is not None:  # always: an account owner is signed in
        request.app.state.sessions.delete(session.sid)
    stored = get_user(ctx, user.name)
    if stored is None:  # an admin removed the user meanwhile
        raise LoginRequired
    principal = Principal(user.name, user.role, session_epoch=stored["session_epoch"])
    return _start_session(request, principal, "/account", _("Password changed."))


@router.post("/account/tokens")
def new_token(
    request: Request,
    user: AccountOwner,
    label: Annotated[str, Form(max_length=100)],
    role: Annotated[str, Form()],
    password: Annotated[str, Form(max_length=1024)] = "",
) -> HTMLResponse:
    ctx = app_context(request)
    # A session left open on a shared screen must not be enough to mint a credential.
    refused = _password_again(request, user, password, _("Enter your password to create a token."))
    if refused is not None:
        return refused
    try:
        token = create_token(ctx, user.name, label, role)
    except UserError as err:
        return _account_page(request, user, error=str(err))
    # Shown once, in this response only: never stored in a session or a flash message.
    return _account_page(request, user, new_token=token)


@router.post("/account/tokens/{token_id}/revoke")
def revoke(request: Request, user: AccountOwner, token_id: str) -> Response:
    if revoke_token(app_context(request), token_id, user.name):
        flash(request, _("Token revoked."))
    else:
        flash(request, _("No such token."), "error")
    return redirect("/account")
