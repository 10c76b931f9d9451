"""Request bodies are read only from an authenticated client, up to a size, at a pace.

The attack: an unauthenticated 200 MB JSON to /api/v1/check grew the admin by 550 MB
before the 401, a 286 MB upload to /works/new was spooled to disk before the redirect to
the login page, and slow bodies held connections open. Against the admin served by uvicorn
on loopback, with raw sockets: the answer comes while almost all of the body is unsent.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from admin import limits
from tests.admin_seed import PASSWORD
from tests.security.raw_http import read_answer, send_head
from tests.served_admin import served_admin
from tracker.accounts.users import add_user, create_token
from tracker.context import Context

pytestmark = pytest.mark.security

HUGE = 200 * 1024 * 1024


@pytest.fixture
def admin_port(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    monkeypatch.setattr(limits, "BODY_TIMEOUT_S", 1.0)
    with served_admin(ctx) as port:
        yield port


def test_no_body_is_read_before_authentication(admin_port: int) -> None:
    for path in ("/api/v1/check", "/works/new"):
        declared = limits.body_cap(path) - 1  # under the cap: only the login stops it
        sock = send_head(admin_port, path, declared)
        sock.sendall(b"x" * 1024)  # 1 KB of it
        status, answer = read_answer(sock)
        sock.close()
        assert status in (401, 303), answer
        assert "login" in answer or "Bearer" in answer


def test_bodies_over_the_route_cap_are_refused_early(ctx: Context, admin_port: int) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    token = create_token(ctx, "ada", "ops")
    auth = f"Authorization: Bearer {token}\r\n"
    # Declared too large: 413 before any of it is sent.
    sock = send_head(admin_port, "/api/v1/check", HUGE, auth)
    status, answer = read_answer(sock)
    sock.close()
    assert status == 413 and "larger than 16 MB" in answer

    # Chunked, no length: 413 once the cap is passed, long before the end.
    sock = send_head(admin_port, "/api/v1/check", None, auth)
    chunk = b"x" * 65536
    try:
        for _ in range(2 * 16 * 16 + 1):  # 32 MB in 64 KB chunks
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed
    status, answer = read_answer(sock)
    sock.close()
    assert status == 413, answer


def test_a_stalled_body_times_out(ctx: Context, admin_port: int) -> None:
    add_user(ctx, "ada", PASSWORD, "admin")
    token = create_token(ctx, "ada", "ops")
    sock = send_head(admin_port, "/api/v1/check", 1000, f"Authorization: Bearer {token}\r\n")
    sock.sendall(b'{"text": "')  # then nothing
    started = time.monotonic()
    status, _ = read_answer(sock)
    sock.close()
    assert status == 408
    assert time.monotonic() - started < 5
