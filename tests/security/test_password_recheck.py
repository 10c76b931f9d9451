"""Asking for the password again is throttled like a login.

The attack: with a session, 40 wrong passwords to `POST /account/tokens` (all 400, no 429)
and 20 wrong `current` passwords to `/account/password` went through, and the 41st, right
one minted a token: a session left open was a free password oracle.
"""

from __future__ import annotations

import pytest

from tests.admin_seed import PASSWORD, client, csrf_of, login
from tracker.accounts.users import add_user, list_tokens, verify_password
from tracker.context import Context

pytestmark = pytest.mark.security


def test_wrong_passwords_for_a_new_token_are_throttled(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    web = client(ctx)
    form = {"label": "CMS", "role": "viewer", "csrf_token": login(web, "ada")}
    statuses = [
        web.post("/account/tokens", data={**form, "password": f"guess number {n}"}).status_code
        for n in range(40)
    ]
    assert statuses[:5] == [400] * 5 and set(statuses[5:]) == {429}
    right = web.post("/account/tokens", data={**form, "password": PASSWORD})
    assert right.status_code == 429 and "Too many failed attempts" in right.text
    assert int(right.headers["Retry-After"]) > 60
    assert "ct_" not in right.text and list_tokens(ctx, "ada") == []
    # The same count as logins: this browser cannot sign in as ada either.
    page = web.get("/login").text
    again = web.post(
        "/login", data={"name": "ada", "password": PASSWORD, "csrf_token": csrf_of(page)}
    )
    assert again.status_code == 429


def test_wrong_current_passwords_are_throttled(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    web = client(ctx)
    csrf = login(web, "ada")
    new = "another horse battery"

    def change(current: str) -> int:
        form = {"current": current, "password": new, "repeat": new, "csrf_token": csrf}
        return web.post("/account/password", data=form, follow_redirects=False).status_code

    statuses = [change(f"guess number {n}") for n in range(20)]
    assert statuses[:5] == [400] * 5 and set(statuses[5:]) == {429}
    assert change(PASSWORD) == 429
    assert verify_password(ctx, "ada", PASSWORD) is not None  # unchanged


def test_a_right_password_again_clears_the_count(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    web = client(ctx)
    form = {"label": "CMS", "role": "viewer", "csrf_token": login(web, "ada")}
    for _ in range(3):  # 4 wrong and one right, three times: never locked
        for n in range(4):
            assert (
                web.post("/account/tokens", data={**form, "password": f"no {n}"}).status_code == 400
            )
        assert web.post("/account/tokens", data={**form, "password": PASSWORD}).status_code == 200
    assert len(list_tokens(ctx, "ada")) == 3
