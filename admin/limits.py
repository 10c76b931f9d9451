"""Request bodies are read only from an authenticated client, up to a size, at a pace.

FastAPI reads and parses a route's body before its dependencies run, so the
authentication gate alone would let anyone make the admin buffer a 200 MB JSON or spool a
300 MB upload to disk before answering 401. `BodyGuard` runs first, as ASGI middleware:

- a request with a body to any route but the login form must carry a valid session or API
  token with the role its route needs, checked from its headers alone, or it is answered
  (401 or a redirect to the login page, 403) without a byte of its body read;
- a body larger than its route's cap (``Content-Length``, or counted as it streams in) is
  answered 413;
- a body that stalls for ``BODY_TIMEOUT_S`` between two chunks is answered 408, so slow
  clients cannot hold connections open forever.

The JSON API's bodies are parsed by `BoundedJsonRoute`, in a worker thread, and only when
they hold at most about twice the JSON values a valid body of the operation can (1,000
works of seven fields each, one text to check): a 60 MB ``{"works": [{}, {}, …]}`` would
have become 20 million dicts (1.5 GB) in the event loop.
"""

from __future__ import annotations

import asyncio
import json
import re
import types
from collections.abc import Callable, Coroutine, Sequence
from datetime import date
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import quote

from annotated_types import MaxLen
from fastapi import HTTPException
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tracker.masters.loaders import MAX_FILE_BYTES

from .security import PUBLIC_ROUTES, SAFE_METHODS, refusal, resolve_auth, route_needs

#: Largest body per route prefix (bytes); the first match wins.
BODY_CAPS: tuple[tuple[str, int], ...] = (
    ("/works/new", 2 * MAX_FILE_BYTES),  # uploads: a few files up to MAX_FILE_BYTES
    ("/works/", 16 * 1024 * 1024),  # an edited work: 400,000 characters, form-encoded
    ("/api/v1/works", 32 * 1024 * 1024),  # a batch of up to 1,000 works
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
        role_checked = False  # on the first read of the body, once the route is known
        answered = False  # a refusal went out: the app's own response is dropped

        async def refuse(status: int, message: str) -> Message:
            nonlocal answered
            if not answered:
                answered = True
                await _answer(scope, send, status, message)
            # The app sees the client gone (its body parser would make a refusal a 400).
            return {"type": "http.disconnect"}

        async def guarded_receive() -> Message:
            nonlocal received, role_checked
            if answered:
                return {"type": "http.disconnect"}
            if not role_checked:
                role_checked = True
                reason = _role_refusal(scope)
                if reason is not None:
                    return await refuse(403, reason)
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


def _role_refusal(scope: Scope) -> str | None:
    """Why the request's principal may not use the route it goes to (FastAPI reads and
    parses a body before the route's role check runs)."""
    auth = scope.get("state", {}).get("auth")
    needs = route_needs(scope.get("route"))
    return refusal(auth, *needs) if auth is not None and needs else None


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


#: One JSON value, after the separators and closing brackets before it: a string, an
#: opening bracket, a number or a literal. Matched one after another from the start, each
#: value of a valid document once (an invalid one stops the count; the parser says why).
_JSON_VALUE = re.compile(
    rb'[\s,:\]}]*(?:"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|-?[0-9][0-9.eE+-]*|true|false|null)'
)


def json_values_within(raw: bytes, limit: int) -> bool:
    """Whether the JSON document ``raw`` holds at most ``limit`` values (objects, arrays,
    keys, strings, numbers, literals), counted without building any."""
    # Every value but the first follows a comma, a colon or an opening bracket: when these
    # are few (texts without many commas), no need to count values one by one.
    if 1 + sum(raw.count(c) for c in (b",", b":", b"[")) <= limit:
        return True
    at, count, match = 0, 0, _JSON_VALUE.match
    while (found := match(raw, at)) is not None:
        count += 1
        if count > limit:
            return False
        at = found.end()
    return True


def json_value_budget(model: type[BaseModel]) -> int:
    """The most JSON values a body ``model`` validates can hold: the object, and per field
    its key and its value's (a list's items up to its ``max_length``)."""
    return 1 + sum(
        1 + _values_of(field.annotation, field.metadata) for field in model.model_fields.values()
    )


def _values_of(annotation: Any, metadata: Sequence[Any]) -> int:
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *more = get_args(annotation)
        return _values_of(inner, [*metadata, *more])
    if origin in (Union, types.UnionType):
        return max(_values_of(choice, metadata) for choice in get_args(annotation))
    if origin is list:
        top = min((m.max_length for m in metadata if isinstance(m, MaxLen)), default=None)
        if top is None:
            raise TypeError(f"a body's list needs a max_length to be bounded: {annotation}")
        return 1 + top * _values_of(get_args(annotation)[0], ())
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return json_value_budget(annotation)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return 1
    if origin is Literal or annotation in (str, int, float, bool, date, type(None)):
        return 1
    raise TypeError(f"no bound on the JSON values of a body's {annotation}")


class _BoundedJsonRequest(Request):
    """A request whose JSON body is parsed in a worker thread, if it holds at most
    ``budget`` values."""

    def __init__(self, scope: Scope, receive: Receive, budget: int) -> None:
        super().__init__(scope, receive)
        self.budget = budget

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = await run_in_threadpool(_parse, await self.body(), self.budget)
        return self._json


def _parse(raw: bytes, budget: int) -> Any:
    if not json_values_within(raw, budget):
        raise HTTPException(
            413,
            f"the JSON body holds more than {budget:,} values, more than any valid request "
            "of this operation: check its shape, or send fewer items per request",
        )
    return json.loads(raw)


class BoundedJsonRoute(APIRoute):
    """An API route whose JSON body is bounded in values by its model and parsed off the
    event loop, so one request can neither make the admin allocate gigabytes nor stall
    the others while it parses."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:
            return handler
        # Twice a valid body's and some: a stray field still gets the 422 that names it.
        model = self.body_field.field_info.annotation
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{self.path}: a JSON body is a pydantic model, not {model!r}")
        budget = 2 * json_value_budget(model) + 100

        async def bounded(request: Request) -> Response:
            return await handler(_BoundedJsonRequest(request.scope, request.receive, budget))

        return bounded
