"""A leaked API token never grants more than its own role.

The attack: an admin's read-only integration token, sent as a bearer token to the web
routes, minted an admin token (`POST /account/tokens role=admin`), then used it on
`/users`; the same token could revoke the user's other tokens. Accounts, tokens and users
are now managed only in a signed-in session, and a new token needs the password again.
"""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.admin_seed import PASSWORD, client, login
from tracker.accounts.users import add_user, create_token, list_tokens
from tracker.context import Context

pytestmark = pytest.mark.security


@pytest.fixture
def admin_with_tokens(ctx: Context) -> tuple[str, str]:
    """An admin user ``ada`` with a read-only integration token and an admin token."""
    add_user(ctx, "ada", PASSWORD, "admin")
    return create_token(ctx, "ada", "dashboard", "viewer"), create_token(ctx, "ada", "ops")


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_viewer_token_cannot_mint_revoke_or_manage_users(ctx, admin_with_tokens) -> None:
    viewer, _ = admin_with_tokens
    web = client(ctx)
    assert web.get("/api/v1/findings", headers=_bearer(viewer)).status_code == 200  # its role
    tokens_before = {t["_id"] for t in list_tokens(ctx, "ada")}

    minted = web.post(
        "/account/tokens", data={"label": "x", "role": "admin"}, headers=_bearer(viewer)
    )
    assert minted.status_code == 403 and "ct_" not in minted.text
    ops_id = next(t["_id"] for t in list_tokens(ctx, "ada") if t["label"] == "ops")
    revoked = web.post(f"/account/tokens/{ops_id}/revoke", headers=_bearer(viewer))
    assert revoked.status_code == 403
    assert {t["_id"] for t in list_tokens(ctx, "ada")} == tokens_before
    assert web.get("/users", headers=_bearer(viewer)).status_code == 403
    assert web.get("/account", headers=_bearer(viewer)).status_code == 403


def test_even_an_admin_token_cannot_change_credentials(ctx, admin_with_tokens) -> None:
    _, admin = admin_with_tokens
    web = client(ctx)
    assert web.get("/settings", headers=_bearer(admin)).status_code == 200  # its role
    form = {"name": "eve", "role": "admin", "password": PASSWORD, "repeat": PASSWORD}
    refused = [
        web.get("/users", headers=_bearer(admin)),
        web.post("/users", data=form, headers=_bearer(admin)),
        web.post("/users/ada/password", data={"password": "x" * 12}, headers=_bearer(admin)),
        web.post("/account/password", headers=_bearer(admin), data={
            "current": PASSWORD, "password": "y" * 12, "repeat": "y" * 12}),
    ]  # fmt: skip
    assert [r.status_code for r in refused] == [403] * 4
    assert "signed in to the admin in a browser" in refused[1].text
    assert ctx.db.users.find_one({"_id": "eve"}) is None
    assert login(client(ctx), "ada")  # the password is unchanged


def test_creating_a_token_in_a_session_needs_the_password(ctx, admin_with_tokens) -> None:
    web: TestClient = client(ctx)
    csrf = login(web, "ada")
    form = {"label": "CMS", "role": "viewer", "csrf_token": csrf}
    for password in ("", "wrong password!"):
        page = web.post("/account/tokens", data={**form, "password": password})
        assert page.status_code == 400 and "Enter your password" in page.text
    assert len(list_tokens(ctx, "ada")) == 2
    created = web.post("/account/tokens", data={**form, "password": PASSWORD})
    assert re.search(r'id="new-token" value="ct_', created.text)
    assert len(list_tokens(ctx, "ada")) == 3
