"""The login throttle counts before it checks and believes no forged address.
The attack: 30 concurrent wrong passwords were all checked (limit 5), and a forged
X-Forwarded-For from loopback let the right password in while the user was locked out.
Against the admin served by uvicorn with `copytrack admin`'s own server options."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from copytrack.commands.admin import server_options
from tests.admin_seed import PASSWORD
from tests.served_admin import served_admin
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.config import Settings

pytestmark = pytest.mark.security


def _serve(ctx: Context, settings: Settings) -> Iterator[str]:
    with served_admin(ctx, **server_options(settings)) as port:
        yield f"http://127.0.0.1:{port}"


def _post_login(
    http: httpx.Client, password: str, forwarded: str | None = None, name: str = "rui"
) -> httpx.Response:
    page = http.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    return http.post(
        "/login",
        data={"name": name, "password": password, "csrf_token": token},
        headers={"X-Forwarded-For": forwarded} if forwarded else {},
    )


def _login(http: httpx.Client, password: str, forwarded: str) -> int:
    return _post_login(http, password, forwarded).status_code


@pytest.fixture
def untrusting(ctx: Context) -> Iterator[str]:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    yield from _serve(ctx, ctx.settings)


def test_forged_forwarded_addresses_do_not_escape_the_lock(untrusting: str) -> None:
    with httpx.Client(base_url=untrusting) as http:
        for n in range(5):
            assert _login(http, "wrong", f"203.0.113.{n}") == 401
        # Another forged address, the right password: still the same client, still locked.
        assert _login(http, PASSWORD, "198.51.100.7") == 429


def test_behind_a_trusted_proxy_each_client_has_its_own_count(ctx: Context) -> None:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    settings = replace(ctx.settings, trusted_proxies=("127.0.0.1",))
    for base in _serve(ctx, settings):
        with httpx.Client(base_url=base) as http:
            for _ in range(5):
                assert _login(http, "wrong", "203.0.113.1") == 401
            assert _login(http, PASSWORD, "203.0.113.1") == 429  # that client is locked
            assert _login(http, PASSWORD, "203.0.113.2") in (200, 303)  # another is not


def test_guesses_from_many_addresses_slow_the_account_down_without_locking_it(
    ctx: Context,
) -> None:
    """A guessing run spread over addresses (each under its own limit) backs the account
    off, for everyone, for at most a minute; other accounts are untouched."""
    add_user(ctx, "rui", PASSWORD, "reviewer")
    add_user(ctx, "ada", PASSWORD, "reviewer")
    settings = replace(ctx.settings, trusted_proxies=("127.0.0.1",))
    for base in _serve(ctx, settings):
        with httpx.Client(base_url=base) as http:
            for n in range(10):
                assert _login(http, "wrong", f"203.0.113.{n}") == 401
            refused = _post_login(http, PASSWORD, "198.51.100.1")  # the right password
            assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 60
            assert "Try again in" in refused.text
            other = _post_login(http, PASSWORD, "198.51.100.2", name="ada")
            assert other.status_code in (200, 303)


def test_behind_an_untrusted_proxy_a_busy_address_waits_briefly_not_for_the_window(
    untrusting: str,
) -> None:
    """All clients behind an unlisted proxy share its address: 30 failures over many names
    must not lock every user out for the window (they wait seconds, not 15 minutes)."""
    with httpx.Client(base_url=untrusting) as http:
        for n in range(30):
            assert _post_login(http, "wrong", name=f"guess{n}").status_code == 401
        refused = _post_login(http, PASSWORD)
        assert refused.status_code == 429 and 0 < int(refused.headers["Retry-After"]) <= 60
