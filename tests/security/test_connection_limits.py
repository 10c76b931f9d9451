"""Sockets that send nothing cannot take the admin offline.

The attack: 210 connections that never sent a request line (or half of one) held uvicorn's
`limit_concurrency=200`, and `/healthz` answered 503 to everybody for the whole 40 s test.
Against the admin served with `copytrack admin`'s own server options, attacking from other
loopback addresses (127.0.0.2 and up) than the reviewer's (127.0.0.1).
"""

from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from admin.connections import HEAD_TIMEOUT_S
from copytrack.commands.admin import server_options
from tests.admin_seed import PASSWORD
from tests.served_admin import served_admin
from tracker.accounts.users import add_user
from tracker.context import Context
from tracker.core.config import Settings

pytestmark = pytest.mark.security

ATTACKERS = 25  # loopback addresses, each under the per-client bound


def _serve(ctx: Context, settings: Settings) -> Iterator[int]:
    add_user(ctx, "rui", PASSWORD, "reviewer")
    with served_admin(ctx, **server_options(settings)) as port:
        yield port


@pytest.fixture
def port(ctx: Context) -> Iterator[int]:
    yield from _serve(ctx, ctx.settings)


def _open(port: int, source: str, head: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    if head:
        sock.sendall(head)
    return sock


def _closed(sock: socket.socket) -> bool:
    """Whether the server has closed the connection (what it sent before is dropped)."""
    sock.setblocking(False)
    try:
        while sock.recv(4096):
            pass
    except BlockingIOError:
        return False
    except ConnectionResetError:
        pass
    return True


def _signed_in(base: str) -> httpx.Client:
    http = httpx.Client(base_url=base, timeout=5)
    page = http.get("/login").text
    token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    answer = http.post("/login", data={"name": "rui", "password": PASSWORD, "csrf_token": token})
    assert answer.status_code == 303, answer.text
    return http


def _timed_get(http: httpx.Client, path: str) -> tuple[int, float]:
    started = time.monotonic()
    status = http.get(path).status_code
    return status, time.monotonic() - started


def test_idle_sockets_do_not_keep_anybody_out(port: int) -> None:
    base = f"http://127.0.0.1:{port}"
    reviewer = _signed_in(base)
    # 250 sockets from 25 addresses: idle, half a request line, a whole line without headers.
    heads = (b"", b"GET /healthz HT", b"GET / HTTP/1.1\r\nHost: x\r\n")
    attack = [
        _open(port, f"127.0.0.{2 + n % ATTACKERS}", heads[n % len(heads)]) for n in range(250)
    ]
    # A kept-alive connection that drips its next request a byte a second.
    dripper = _open(port, "127.0.0.99", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert dripper.recv(65536).startswith(b"HTTP/1.1 200 ")
    opened = time.monotonic()

    status, took = _timed_get(httpx.Client(base_url=base, timeout=5), "/healthz")
    assert (status, took < 1) == (200, True), (status, took)
    status, took = _timed_get(reviewer, "/findings")
    assert (status, took < 2) == (200, True), (status, took)

    for byte in b"GET /healthz HTTP/1.1\r\n"[: int(HEAD_TIMEOUT_S) + 2]:
        try:
            dripper.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            break
        time.sleep(1)
    time.sleep(max(0.0, opened + HEAD_TIMEOUT_S + 1 - time.monotonic()))
    still_open = [n for n, sock in enumerate(attack) if not _closed(sock)]
    assert still_open == [], f"{len(still_open)} of 250 idle sockets still open"
    assert _closed(dripper), "a dripped request head kept its connection"
    for sock in (*attack, dripper):
        sock.close()
    assert reviewer.get("/findings").status_code == 200


def _status_line(sock: socket.socket) -> bytes:
    sock.settimeout(5)
    try:
        return sock.recv(4096).split(b"\r\n")[0]
    except TimeoutError:
        return b""


def test_one_address_gets_its_share_only(port: int, ctx: Context) -> None:
    share = ctx.settings.admin_connections_per_client
    socks = [_open(port, "127.0.0.2") for _ in range(share + 20)]
    time.sleep(0.3)
    assert not any(_closed(sock) for sock in socks[:share])  # well before the head timeout
    answers = [_status_line(sock) for sock in socks[share:]]
    assert answers == [b"HTTP/1.1 503 Service Unavailable"] * 20
    assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    for sock in socks:
        sock.close()


def test_a_trusted_proxy_is_not_bounded_per_client(ctx: Context) -> None:
    settings = replace(ctx.settings, trusted_proxies=("127.0.0.2",))
    for port in _serve(ctx, settings):
        socks = [_open(port, "127.0.0.2") for _ in range(2 * settings.admin_connections_per_client)]
        time.sleep(0.3)
        assert not any(_closed(sock) for sock in socks)
        for sock in socks:
            sock.close()
