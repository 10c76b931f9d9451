"""Tokens made before tokens expired expire too.

The attack: a token stored without ``expires_at`` (made by a copytrack from before token
expiry) was never checked for expiry, and `copytrack token list` said "expires never".
Such a token now gets ``TOKEN_DAYS`` from the first time it is used or listed.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.admin_seed import PASSWORD
from tracker.accounts import users
from tracker.accounts.users import TOKEN_DAYS, add_user, create_token, verify_token
from tracker.context import Context
from tracker.core.times import now

pytestmark = pytest.mark.security


def _stored_the_old_way(ctx: Context, label: str) -> str:
    """A token as copytrack stored them before tokens expired: no ``expires_at``, made
    long ago."""
    token = create_token(ctx, "ada", label)
    ctx.db.tokens.update_one(
        {"label": label},
        {"$unset": {"expires_at": ""}, "$set": {"created_at": now() - timedelta(days=800)}},
    )
    return token


def test_an_undated_token_expires_after_its_first_use(
    ctx: Context, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    token = _stored_the_old_way(ctx, "old cms")
    assert verify_token(ctx, token) is not None  # it keeps working for now
    stored = ctx.db.tokens.find_one({"label": "old cms"})
    given = stored["expires_at"] - stored["dated_at"]
    assert abs(given - timedelta(days=TOKEN_DAYS)) < timedelta(seconds=5)

    later = now() + timedelta(days=TOKEN_DAYS, hours=1)
    monkeypatch.setattr(users, "now", lambda: later)
    assert verify_token(ctx, token) is None


def test_the_token_list_dates_undated_tokens(ctx: Context, tracker_env: dict[str, str]) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    _stored_the_old_way(ctx, "never used")
    listed = CliRunner().invoke(main, ["token", "list"], catch_exceptions=False)
    assert listed.exit_code == 0, listed.output
    line = next(line for line in listed.output.splitlines() if "never used" in line)
    expiry = (now() + timedelta(days=TOKEN_DAYS)).date().isoformat()
    assert f"expires {expiry} (set {now().date().isoformat()}: made before tokens expired)" in line
    assert "expires never" not in listed.output
