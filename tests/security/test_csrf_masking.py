"""No response carries the CSRF token as it is (BREACH).

The conditions: pages are gzip-compressed, reflect the request's input (the findings
search ``q``) and carried the session's CSRF token unchanged, so an attacker who can make
a reviewer's browser ask for pages and watch their sizes could guess the token a character
at a time. Every response now carries it masked with a fresh pad: two answers never share
it, and each masked form still works.
"""

from __future__ import annotations

import pytest

from admin.security import SESSION_COOKIE
from tests.admin_seed import PASSWORD, client, csrf_of, login
from tracker.accounts.users import add_user
from tracker.context import Context

pytestmark = pytest.mark.security


def test_every_page_masks_the_session_token_afresh(ctx: Context) -> None:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    web = client(ctx)
    login(web, "rui")
    session = web.app.state.sessions.load(web.cookies[SESSION_COOKIE])
    pages = [web.get("/findings", params={"q": "csrf"}) for _ in range(2)]
    assert all(page.headers.get("content-encoding") == "gzip" for page in pages)
    tokens = [csrf_of(page.text) for page in pages]
    assert tokens[0] != tokens[1]
    assert all(session.csrf not in page.text for page in pages)
    for token in tokens:  # each one works
        form = {"csrf_token": token, "status": "confirmed"}
        assert web.post("/findings/bulk", data=form, follow_redirects=False).status_code == 303
    bare = {"csrf_token": session.csrf, "status": "confirmed"}  # the secret is no token
    assert web.post("/findings/bulk", data=bare, follow_redirects=False).status_code == 403


def test_the_login_form_masks_its_token_too(ctx: Context) -> None:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    web = client(ctx)
    first, second = (csrf_of(web.get("/login").text) for _ in range(2))
    assert first != second
    # A wrong password (401) gets past the token check, as the right one (303) does.
    for token, password, status in ((first, "not the password", 401), (second, PASSWORD, 303)):
        form = {"name": "rui", "password": password, "csrf_token": token}
        assert web.post("/login", data=form, follow_redirects=False).status_code == status
