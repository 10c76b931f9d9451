"""COPYTRACK_SECURE_COOKIES: behind a TLS proxy that is not listed in
COPYTRACK_TRUSTED_PROXIES the admin sees plain HTTP, so without the setting its session
cookie loses ``Secure``. With it, every cookie is ``Secure`` and ``__Host-`` prefixed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from fastapi.testclient import TestClient

from admin.app import create_app
from admin.security import LOGIN_CSRF_COOKIE, SESSION_COOKIE
from tests.admin_seed import PASSWORD, csrf_of
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.config import ConfigError, Settings

pytestmark = pytest.mark.security


def _set_cookies(response) -> dict[str, str]:
    """Each cookie the response sets, by name, with its attributes (lower case)."""
    return {line.split("=", 1)[0]: line.lower() for line in response.headers.get_list("set-cookie")}


def _log_in(http: TestClient) -> tuple[dict[str, str], dict[str, str]]:
    form = http.get("/login")
    response = http.post(
        "/login",
        data={"name": "rui", "password": PASSWORD, "csrf_token": csrf_of(form.text)},
        follow_redirects=False,
    )
    assert response.status_code == 303, response.text
    return _set_cookies(form), _set_cookies(response)


def test_the_setting_makes_every_cookie_secure_with_the_host_prefix(ctx: Context) -> None:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    secure = replace(ctx, settings=replace(ctx.settings, secure_cookies=True))
    # The TLS proxy speaks HTTPS to the browser; the browser sends Secure cookies back.
    with TestClient(create_app(secure), base_url="https://admin.example") as http:
        form_cookies, login_cookies = _log_in(http)
        login_csrf = form_cookies["__Host-" + LOGIN_CSRF_COOKIE]
        session = login_cookies["__Host-" + SESSION_COOKIE]
        for cookie in (login_csrf, session):
            assert "; secure" in cookie and "path=/" in cookie and "domain=" not in cookie
        assert SESSION_COOKIE not in login_cookies  # no unprefixed twin
        assert http.get("/", follow_redirects=False).status_code == 200  # the session works
        # An unprefixed cookie (set by a sibling host or a plain-HTTP page) is not a session.
        sid = http.cookies.get("__Host-" + SESSION_COOKIE)
        http.cookies.clear()
        http.cookies.set(SESSION_COOKIE, sid)
        assert http.get("/", follow_redirects=False).status_code in (302, 303)


def test_without_the_setting_plain_http_gets_plain_cookies(ctx: Context) -> None:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    with TestClient(create_app(ctx), base_url="http://127.0.0.1") as http:
        _, login_cookies = _log_in(http)
    assert "; secure" not in login_cookies[SESSION_COOKIE]


def test_the_setting_is_validated() -> None:
    assert Settings.from_env({"COPYTRACK_SECURE_COOKIES": "on"}).secure_cookies
    with pytest.raises(ConfigError, match="COPYTRACK_SECURE_COOKIES"):
        Settings.from_env({"COPYTRACK_SECURE_COOKIES": "maybe"})
