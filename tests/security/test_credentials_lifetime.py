"""Credentials end when they should: a removed user's sessions do not
come back when the name is reused, API tokens expire, and a password change revokes the
user's tokens unless told to keep them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.admin_seed import PASSWORD, client, login
from tracker.accounts.users import (
    UserError,
    add_user,
    create_token,
    remove_user,
    set_password,
    verify_token,
)
from tracker.context import Context

pytestmark = pytest.mark.security


def test_a_reused_name_does_not_revive_old_sessions(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    add_user(ctx, "eve", PASSWORD, "admin")
    http = client(ctx)
    login(http, "eve")
    assert http.get("/users", follow_redirects=False).status_code == 200
    remove_user(ctx, "eve")
    add_user(ctx, "eve", PASSWORD + "-new", "viewer")  # someone else, same name
    assert http.get("/users", follow_redirects=False).status_code in (302, 303)


def test_tokens_expire(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    token = create_token(ctx, "ada", "cms", days=1)
    assert verify_token(ctx, token) is not None
    ctx.db.tokens.update_many(
        {}, {"$set": {"expires_at": datetime.now(UTC) - timedelta(seconds=1)}}
    )
    assert verify_token(ctx, token) is None
    with pytest.raises(UserError, match="1 to 730 days"):
        create_token(ctx, "ada", "forever", days=10_000)


def test_a_password_change_revokes_tokens_unless_kept(ctx: Context) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    first = create_token(ctx, "ada", "cms")
    set_password(ctx, "ada", PASSWORD + "-2")
    assert verify_token(ctx, first) is None
    second = create_token(ctx, "ada", "cms")
    set_password(ctx, "ada", PASSWORD + "-3", keep_tokens=True)
    assert verify_token(ctx, second) is not None
