"""A token cannot make the admin allocate gigabytes or freeze.

The attack: `POST /api/v1/works` with a viewer token and `{"works": [{}, {}, …]}` of 60 MB
grew the admin by 1.6 GB and stalled every other request for seconds: the JSON was parsed
in the event loop, before the role check; `/api/v1/check` with 16 MB of nested arrays
peaked 400 MB higher. Against the admin served by uvicorn on loopback, measuring this
process (the admin serves in it) and the answer times of /healthz meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from admin.limits import body_cap
from admin.routes.api import MAX_WORKS, openapi_schema
from copytrack.commands.admin import server_options
from tests.admin_seed import PASSWORD
from tests.security.raw_http import measured, post_json, read_answer, send_head
from tests.served_admin import served_admin
from tracker.accounts.users import add_user, create_token
from tracker.context import Context

pytestmark = pytest.mark.security

#: Empty works, as many as fit under the works route's byte cap.
EMPTY_WORKS = b'{"works":[' + b"{}," * (body_cap("/api/v1/works") // 3 - 10) + b"{}]}"


@pytest.fixture
def port(ctx: Context) -> Iterator[int]:
    with served_admin(ctx, **server_options(ctx.settings)) as port:
        yield port


def _token(ctx: Context, role: str) -> str:
    add_user(ctx, role, PASSWORD, role)
    return create_token(ctx, role, "integration")


def test_a_role_too_low_is_refused_before_the_body_is_read(ctx: Context, port: int) -> None:
    viewer = f"Authorization: Bearer {_token(ctx, 'viewer')}\r\n"
    for path in ("/api/v1/works", "/works/new"):
        sock = send_head(port, path, body_cap(path) - 1, viewer)  # under the cap
        sock.sendall(b'{"works":[{},')  # and hardly any of it
        status, answer = read_answer(sock)
        sock.close()
        assert status == 403, answer
        assert "needs the reviewer role; you are viewer" in answer


def test_a_batch_of_empty_works_is_refused_without_being_built(ctx: Context, port: int) -> None:
    reviewer = _token(ctx, "reviewer")
    with measured(port) as load:
        status, answer = post_json(port, "/api/v1/works", reviewer, EMPTY_WORKS)
    assert status == 413, answer
    assert "send fewer items per request" in answer
    # Was: 1.5 GB more, /healthz waiting 5 s. The body itself is 32 MB, held twice.
    assert load.growth_mb < 120, load
    assert load.slowest_s < 2, load  # on a busy machine; was 5-6 s


def test_a_text_check_with_nested_arrays_is_bounded(ctx: Context, port: int) -> None:
    viewer = _token(ctx, "viewer")
    nested = b'{"text":"a","x":[' + b"[]," * 5_000_000 + b"[]]}"  # 14 MB
    with measured(port) as load:
        status, answer = post_json(port, "/api/v1/check", viewer, nested)
    assert status == 413, answer
    assert load.growth_mb < 80, load  # was 365 MB, with /healthz waiting 6 s
    assert load.slowest_s < 2, load  # on a busy machine; was 5-6 s


def test_a_large_valid_check_does_not_stall_the_others(ctx: Context, port: int) -> None:
    viewer = _token(ctx, "viewer")
    text = json.dumps({"text": "中文字" * 660_000}).encode()  # 2 M characters, 11 MB escaped
    with measured(port) as load:
        status, answer = post_json(port, "/api/v1/check", viewer, text)
    assert status == 200, answer
    assert load.slowest_s < 2, load


def test_the_document_states_the_caps() -> None:
    works = openapi_schema()["paths"]["/api/v1/works"]["post"]
    assert f"{MAX_WORKS:,} works and 32 MB" in works["description"]
    assert "413" in works["responses"]
    schema = openapi_schema()["components"]["schemas"]["WorksIn"]
    assert schema["properties"]["works"]["maxItems"] == MAX_WORKS
