"""Connections to the admin: bounded per client and in all, and a request head must come
promptly.

uvicorn closes an idle keep-alive connection, but not one that never completes a request
head, and its ``limit_concurrency`` counts open connections: 210 sockets that sent nothing
made the admin answer 503 to everybody. `guarded_protocol` gives uvicorn its h11 protocol
with a `ConnectionGuard`, which

- closes a connection whose request head is not complete ``head_timeout_s`` after the
  connection opened, or after the first byte of a later request on a kept-alive one
  (between requests, uvicorn's own keep-alive timeout closes it);
- answers 503 to a connection past ``per_client`` open ones from one address, except from
  a trusted proxy (it carries everybody's);
- past ``total`` open connections, closes the oldest one that waits for a request head to
  let the new one in, so sockets that send nothing never lock anybody out; 503 only when
  every connection is busy with a request.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from collections import Counter
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

#: Seconds a client has to send a whole request head (a browser sends it at once).
HEAD_TIMEOUT_S = 5.0
#: Seconds between two warnings about refused connections (an attack would flood the log).
WARN_EVERY_S = 60.0


@dataclass(frozen=True)
class ConnectionLimits:
    """How many connections the admin keeps open, in all and per client address."""

    total: int
    per_client: int
    #: Addresses or networks never bounded per client (the reverse proxies).
    unbounded: tuple[str, ...] = ()
    head_timeout_s: float = HEAD_TIMEOUT_S


class ConnectionGuard:
    """The open connections of one server, oldest first, and their count per address."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._unbounded = [ipaddress.ip_network(n, strict=False) for n in limits.unbounded]
        self._open: dict[GuardedH11Protocol, str] = {}  # connection -> its client address
        self._per_client: Counter[str] = Counter()
        self._refused = 0
        self._warned_at = -WARN_EVERY_S

    def admit(self, connection: GuardedH11Protocol, client: str) -> str | None:
        """Count a new connection in; or why it is refused."""
        if self._per_client[client] >= self.limits.per_client and not self._is_proxy(client):
            return self._refuse(f"more than {self.limits.per_client} connections from {client}")
        if len(self._open) >= self.limits.total:
            idle = next((c for c in self._open if c.waiting_for_head), None)
            if idle is None:
                return self._refuse(f"all {self.limits.total} connections are busy")
            idle.close()
        self._open[connection] = client
        self._per_client[client] += 1
        return None

    def release(self, connection: GuardedH11Protocol) -> None:
        """Count a closed connection out (again: a no-op)."""
        client = self._open.pop(connection, None)
        if client is not None:
            self._per_client[client] -= 1
            if not self._per_client[client]:
                del self._per_client[client]

    def open_connections(self, client: str | None = None) -> int:
        """How many connections are open (from ``client``, when given)."""
        return len(self._open) if client is None else self._per_client[client]

    def _is_proxy(self, client: str) -> bool:
        try:
            address = ipaddress.ip_address(client)
        except ValueError:
            return False
        return any(address in network for network in self._unbounded)

    def _refuse(self, reason: str) -> str:
        self._refused += 1
        if time.monotonic() - self._warned_at >= WARN_EVERY_S:
            log.warning("admin refused %d connection(s): %s", self._refused, reason)
            self._warned_at, self._refused = time.monotonic(), 0
        return reason


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol under a `ConnectionGuard` (see the module docstring)."""

    guard: ConnectionGuard  # set by guarded_protocol, one per server

    _head_timer: asyncio.TimerHandle | None = None

    @property
    def waiting_for_head(self) -> bool:
        """No request in progress: idle, or part of a head received."""
        return self.conn.their_state is h11.IDLE

    # As uvicorn's H11Protocol declares it (asyncio's base protocol takes a BaseTransport).
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        client = self.client[0] if self.client else "unknown"
        refusal = self.guard.admit(self, client)
        if refusal is not None:
            self._refuse(refusal)
            return
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.waiting_for_head:
            self._arm_head_timer()  # the first byte of the next request on a kept-alive one
        super().data_received(data)
        if not self.waiting_for_head:
            self._cancel_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self.guard.release(self)
        super().connection_lost(exc)

    def close(self) -> None:
        """Close this connection now (it waits for a head: there is nothing to finish)."""
        self._cancel_head_timer()
        self.guard.release(self)
        self.transport.close()

    def _arm_head_timer(self) -> None:
        self._head_timer = self.loop.call_later(
            self.guard.limits.head_timeout_s, self._head_timed_out
        )

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.waiting_for_head and not self.transport.is_closing():
            self.close()

    def _refuse(self, reason: str) -> None:
        body = f"the admin is not taking this connection: {reason}; try again later\n".encode()
        self.transport.write(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
            b"retry-after: 5\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (len(body), body)
        )
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedH11Protocol]:
    """An HTTP protocol class for uvicorn (its ``http`` option) with its own guard: give
    each server its own."""
    return type("AdminHTTPProtocol", (GuardedH11Protocol,), {"guard": ConnectionGuard(limits)})
