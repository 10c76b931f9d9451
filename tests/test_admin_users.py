"""Users, API tokens and login throttling (tracker.accounts.users), and their command line."""

from __future__ import annotations

import dataclasses
import html
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from copytrack.cli import main
from tests.admin_seed import client, login, seed
from tracker.accounts.users import (
    Backoff,
    LoginThrottle,
    UserError,
    add_user,
    create_token,
    get_user,
    list_tokens,
    remove_user,
    revoke_token,
    set_password,
    set_role,
    verify_password,
    verify_token,
)
from tracker.core.config import Settings
from tracker.findings.dashboard import dashboard, invalidate_dashboard
from tracker.masters.generation import open_ready

PASSWORD = "correct horse battery"


def test_passwords_are_hashed_with_argon2_and_verified(ctx):
    add_user(ctx, "rui", PASSWORD, "reviewer")
    stored = get_user(ctx, "rui")
    assert stored["password_hash"].startswith("$argon2id$") and PASSWORD not in str(stored)
    principal = verify_password(ctx, "rui", PASSWORD)
    assert principal.name == "rui" and principal.role == "reviewer"
    assert principal.can("viewer") and not principal.can("admin")
    assert verify_password(ctx, "rui", "wrong password!") is None
    assert verify_password(ctx, "nobody", PASSWORD) is None


@pytest.mark.parametrize(
    ("name", "password", "role", "problem"),
    [
        ("ok", "short", "viewer", "too short"),
        ("ok", "aaaaaaaaaaaa", "viewer", "too simple"),
        ("bad name", PASSWORD, "viewer", "invalid user name"),
        ("ok", PASSWORD, "root", "unknown role"),
    ],
)
def test_bad_users_are_refused(ctx, name, password, role, problem):
    with pytest.raises(UserError, match=problem):
        add_user(ctx, name, password, role)


def test_the_last_admin_stays_and_password_changes_end_sessions(ctx):
    add_user(ctx, "ada", PASSWORD, "admin")
    with pytest.raises(UserError, match="already exists"):
        add_user(ctx, "ada", PASSWORD, "admin")
    with pytest.raises(UserError, match="last admin"):
        set_role(ctx, "ada", "viewer")
    with pytest.raises(UserError, match="last admin"):
        remove_user(ctx, "ada")
    add_user(ctx, "bo", PASSWORD, "admin")
    set_role(ctx, "ada", "viewer")
    assert get_user(ctx, "ada")["role"] == "viewer"
    epoch = get_user(ctx, "bo")["session_epoch"]
    set_password(ctx, "bo", "another good password")
    assert get_user(ctx, "bo")["session_epoch"] == epoch + 1
    assert verify_password(ctx, "bo", "another good password").session_epoch == epoch + 1
    with pytest.raises(UserError, match="no user"):
        set_password(ctx, "ghost", PASSWORD)


def test_tokens_are_stored_hashed_and_never_exceed_their_user(ctx):
    add_user(ctx, "rui", PASSWORD, "reviewer")
    add_user(ctx, "ada", PASSWORD, "admin")
    token = create_token(ctx, "rui", "CMS import")
    token_id = token.split("_")[1]
    stored = ctx.db.tokens.find_one({"_id": token_id})
    assert token not in str(stored) and token.split("_", 2)[2] not in str(stored)
    assert verify_token(ctx, token).role == "reviewer"
    assert ctx.db.tokens.find_one({"_id": token_id})["last_used"] is not None
    assert verify_token(ctx, token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert verify_token(ctx, "not a token") is None
    with pytest.raises(UserError, match="more rights"):
        create_token(ctx, "rui", "x", role="admin")
    with pytest.raises(UserError, match="label"):
        create_token(ctx, "rui", "  ")
    read_only = create_token(ctx, "ada", "dashboards", role="viewer")
    assert verify_token(ctx, read_only).role == "viewer"
    set_role(ctx, "rui", "viewer")  # demoting the user demotes its tokens
    assert verify_token(ctx, token).role == "viewer"
    assert [t["label"] for t in list_tokens(ctx, "rui")] == ["CMS import"]
    assert not revoke_token(ctx, token_id, user="ada")  # not ada's token
    assert revoke_token(ctx, token_id, user="rui")
    assert verify_token(ctx, token) is None
    add_user(ctx, "temp", PASSWORD, "viewer")
    temp_token = create_token(ctx, "temp", "t")
    remove_user(ctx, "temp")
    assert verify_token(ctx, temp_token) is None and list_tokens(ctx, "temp") == []


def test_failed_logins_back_off_per_pair_account_and_client(ctx):
    throttle = LoginThrottle(
        pair=Backoff(free=3, base_s=60, cap_s=60),
        account=Backoff(free=5, base_s=30, cap_s=120),
        client=Backoff(free=5, base_s=20, cap_s=40),
        window_s=600,
    )
    for _ in range(3):  # three wrong passwords (each attempt counts before it is checked)
        assert throttle.attempt(ctx, "10.0.0.1", "rui") == 0
    assert 30 < throttle.attempt(ctx, "10.0.0.1", "rui") <= 60  # this pair is locked
    assert throttle.attempt(ctx, "10.0.0.1", "ada") == 0  # another name
    assert throttle.attempt(ctx, "10.0.0.2", "rui") == 0  # another client
    assert throttle.attempt(ctx, "10.0.0.1", "bo") == 0
    # The client tried five names: it backs off, but briefly, not for the window.
    assert 0 < throttle.attempt(ctx, "10.0.0.1", "cy") <= 20
    assert throttle.attempt(ctx, "10.0.0.3", "rui") == 0  # rui's fifth failure
    # From anywhere, rui is now slowed down: a guessing run spread over addresses.
    assert 0 < throttle.attempt(ctx, "10.0.0.4", "rui") <= 30
    throttle.succeeded(ctx, "10.0.0.2", "rui")  # the owner got in: rui's failures are gone
    assert throttle.attempt(ctx, "10.0.0.5", "rui") == 0


def test_an_account_backs_off_but_is_never_locked_out_beyond_the_cap(ctx):
    throttle = LoginThrottle(account=Backoff(free=1, base_s=0.5, cap_s=1.0), window_s=600)
    clients = (f"10.1.0.{n}" for n in range(100))  # every guess from a new address
    assert throttle.attempt(ctx, next(clients), "rui") == 0
    assert throttle.attempt(ctx, next(clients), "rui") > 0  # 0.5 s after the first failure
    for _ in range(3):  # the wait doubles per failure up to the cap, then stays there
        time.sleep(1.05)
        assert throttle.attempt(ctx, next(clients), "rui") == 0
        assert throttle.attempt(ctx, next(clients), "rui") > 0


def test_concurrent_guesses_cannot_pass_the_limit(ctx):
    """30 wrong passwords at once: only the first five are even checked."""
    throttle = LoginThrottle(pair=Backoff(free=5, base_s=60, cap_s=60))
    with ThreadPoolExecutor(10) as pool:
        waits = list(pool.map(lambda _: throttle.attempt(ctx, "10.0.0.9", "rui"), range(30)))
    assert sum(wait == 0 for wait in waits) == 5


def test_the_command_line_manages_users_and_tokens(tracker_env):
    runner = CliRunner()

    def run(*args: str, stdin: str | None = None):
        return runner.invoke(main, list(args), input=stdin, catch_exceptions=False)

    added = run("user", "add", "ada", "--role", "admin", "--password-stdin", stdin=PASSWORD + "\n")
    assert added.exit_code == 0 and "added\tada\tadmin" in added.output
    prompted = run("user", "add", "rui", stdin=f"{PASSWORD}\n{PASSWORD}\n")
    assert prompted.exit_code == 0 and "added\trui\treviewer" in prompted.output
    weak = run("user", "add", "bo", "--password-stdin", stdin="123\n")
    assert weak.exit_code == 1 and "too short" in weak.output
    listed = run("user", "list")
    assert [line.split("\t")[:2] for line in listed.output.splitlines()] == [
        ["ada", "admin"],
        ["rui", "reviewer"],
    ]
    created = run("token", "create", "rui", "--label", "CMS", "--role", "viewer")
    token = created.output.strip()
    ctx = open_ready(Settings.from_env(tracker_env))
    try:
        assert verify_token(ctx, token).role == "viewer"
        assert "CMS" in run("token", "list").output
        assert run("token", "revoke", token.split("_")[1]).exit_code == 0
        assert verify_token(ctx, token) is None
    finally:
        ctx.close()
    assert run("token", "revoke", "nope").exit_code == 1
    refused = run("user", "rm", "ada")
    assert refused.exit_code == 1 and "last admin" in refused.output
    assert run("user", "rm", "rui").output.strip() == "removed\trui"
    assert "--port" in run("admin", "--help").output


def test_times_are_shown_in_the_readers_zone_with_the_offset_and_evidence_keeps_utc(ctx):
    seeded = seed(ctx)
    finding = ctx.db.findings.find_one({"_id": seeded.findings[2]})
    seen = finding["first_seen"].astimezone(UTC)
    http = client(ctx)
    token = login(http, "rui")
    utc_page = http.get(f"/findings/{finding['_id']}").text
    assert f"{seen:%Y-%m-%d %H:%M} UTC" in utc_page  # the installation's default zone
    refused = http.post("/account/time-zone", data={"csrf_token": token, "time_zone": "Mars/Base"})
    assert refused.status_code == 400 and "'Mars/Base' is not a time zone" in html.unescape(
        refused.text
    )
    http.post("/account/time-zone", data={"csrf_token": token, "time_zone": "Asia/Shanghai"})
    beijing = seen.astimezone(ZoneInfo("Asia/Shanghai"))
    page = http.get(f"/findings/{finding['_id']}").text
    assert f"{beijing:%Y-%m-%d %H:%M} UTC+8" in page
    evidence = http.get(f"/findings/{finding['_id']}/evidence").text
    assert f"{seen:%Y-%m-%d %H:%M:%S} UTC ({beijing:%Y-%m-%d %H:%M:%S} UTC+8)" in evidence
    other = client(ctx)
    login(other, "vic")  # another reader keeps the installation's zone
    assert f"{seen:%Y-%m-%d %H:%M} UTC" in other.get(f"/findings/{finding['_id']}").text


def test_the_dashboard_counts_the_installations_days(ctx):
    seed(ctx)
    late = datetime.now(UTC).replace(hour=20, minute=0, second=0, microsecond=0)
    if late > datetime.now(UTC):
        late -= timedelta(days=1)  # 20:00 UTC: the next day in Beijing already
    ctx.db.findings.update_many({}, {"$set": {"first_seen": late}})
    invalidate_dashboard(ctx)
    in_utc = {row["day"]: row["findings"] for row in dashboard(ctx)["per_day"]}
    beijing = dataclasses.replace(
        ctx, settings=dataclasses.replace(ctx.settings, time_zone="Asia/Shanghai")
    )
    invalidate_dashboard(beijing)
    local = {row["day"]: row["findings"] for row in dashboard(beijing)["per_day"]}
    total = ctx.db.findings.count_documents({})
    next_day = (late + timedelta(days=1)).date().isoformat()
    assert in_utc[late.date().isoformat()] == total
    assert local.get(next_day) == total and local.get(late.date().isoformat(), 0) == 0


def test_the_installations_zone_is_checked_when_read():
    assert Settings.from_env({"COPYTRACK_TIME_ZONE": "Asia/Shanghai"}).time_zone == "Asia/Shanghai"
    with pytest.raises(ValueError, match="COPYTRACK_TIME_ZONE"):
        Settings.from_env({"COPYTRACK_TIME_ZONE": "Beijing"})
