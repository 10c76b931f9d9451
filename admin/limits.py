"""Request bodies are read only from an authenticated client, up to a size, at a pace.

FastAPI reads and parses a route's body before its dependencies run, so the
authentication gate alone would let anyone make the admin buffer a 200 MB JSON or spool a
300 MB upload to disk before answering 401. `BodyGuard` runs first, as ASGI middleware:

- a request with a body to any route but the login form must carry a valid session or API
  token, checked from its headers alone, or it is answered (401 or a redirect to the login
  page) without a byte of its body read;
- a body larger than its route's cap (``Content-Length``, or counted as it streams in) is
  answered 413;
- a body that stalls for ``BODY_TIMEOUT_S`` between two chunks is answered 408, so slow
  clients cannot hold connections open forever.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.loaders import MAX_FILE_BYTES

from .security import PUBLIC_ROUTES, SAFE_METHODS, resolve_auth

#: Largest body per route prefix (bytes); the first match wins.
BODY_CAPS: tuple[tuple[str, int], ...] = (
    ("/works/new", 2 * MAX_FILE_BYTES),  # uploads: a few files up to MAX_FILE_BYTES
    ("/works/", 16 * 1024 * 1024),  # an edited work: 400,000 characters, form-encoded
    ("/api/v1/works", 2 * MAX_FILE_BYTES),
    ("/api/v1/check", 16 * 1024 * 1024),  # 2 M characters of text, JSON-escaped
)
DEFAULT_BODY_CAP = 1024 * 1024  # forms: statuses, notes, settings
BODY_TIMEOUT_S = 30.0


def body_cap(path: str) -> int:
    """Largest body accepted on path."""
    return next((cap for prefix, cap in BODY_CAPS if path.startswith(prefix)), DEFAULT_BODY_CAP)


class BodyGuard:
    """ASGI middleware: see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        path, cap = scope["path"], body_cap(scope["path"])
        request = Request(scope)
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > cap:
            await _answer(scope, send, 413, f"the request body is larger than {_mb(cap)}")
            return
        if path not in PUBLIC_ROUTES:
            auth = await run_in_threadpool(resolve_auth, request)
            if auth is None:
                await _unauthenticated(scope, send)
                return
            scope.setdefault("state", {})["auth"] = auth  # the gate takes it from here
        received = 0
        answered = False  # a refusal went out: the app's own response is dropped

        async def refuse(status: int, message: str) -> Message:
            nonlocal answered
            if not answered:
                answered = True
                await _answer(scope, send, status, message)
            # The app sees the client gone (its body parser would make a refusal a 400).
            return {"type": "http.disconnect"}

        async def guarded_receive() -> Message:
            nonlocal received
            if answered:
                return {"type": "http.disconnect"}
            try:
                message = await asyncio.wait_for(receive(), BODY_TIMEOUT_S)
            except TimeoutError:
                return await refuse(408, "the request body stalled; send it again")
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > cap:
                    return await refuse(413, f"the request body is larger than {_mb(cap)}")
            return message

        async def guarded_send(message: Message) -> None:
            if not answered:
                await send(message)

        await self.app(scope, guarded_receive, guarded_send)


def _mb(size: int) -> str:
    return f"{size / 2**20:g} MB"


async def _unauthenticated(scope: Scope, send: Send) -> None:
    if scope["path"].startswith("/api/"):
        await _answer(
            scope,
            send,
            401,
            "authentication required: send 'Authorization: Bearer <token>'",
            [(b"www-authenticate", b"Bearer")],
        )
        return
    # A form posted after the session expired: back to the login page, then the form.
    target = quote(scope["path"], safe="")
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", f"/login?next={target}".encode()),
                (b"content-length", b"0"),
                (b"connection", b"close"),  # the unread body must not be taken for a request
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _answer(
    scope: Scope, send: Send, status: int, message: str, extra: list | None = None
) -> None:
    """A short error response, JSON for the API and plain text elsewhere; the connection
    closes after it, so an unread body does not linger."""
    if scope["path"].startswith("/api/"):
        body, kind = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    headers = [
        (b"content-type", kind),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
