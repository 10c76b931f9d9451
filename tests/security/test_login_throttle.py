"""The login throttle counts before it checks and believes no forged address (issue #14,
item 4). The attack: 30 concurrent wrong passwords were all checked (limit 5), and a forged
X-Forwarded-For from loopback let the right password in while the user was locked out.
Against the admin served by uvicorn with `copytrack admin`'s own server options."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest
import uvicorn

from admin.app import create_app
from copytrack.commands.admin import server_options
from tests.test_admin_app import PASSWORD
from tracker.config import Settings
from tracker.context import Context
from tracker.servers import free_port
from tracker.users import add_user

pytestmark = pytest.mark.security


def _serve(ctx: Context, settings: Settings) -> Iterator[str]:
    port = free_port()
    config = uvicorn.Config(
        create_app(ctx),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        **server_options(settings),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        assert time.monotonic() < deadline, "the admin did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _login(http: httpx.Client, password: str, forwarded: str) -> int:
    page = http.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    response = http.post(
        "/login",
        data={"name": "rui", "password": password, "csrf_token": token},
        headers={"X-Forwarded-For": forwarded},
    )
    return response.status_code


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
