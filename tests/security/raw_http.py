"""Raw HTTP against the served admin, for attacks a client library would not make: a
request head sent without (most of) its body, the answer read until the server closes,
and the memory the admin (this process) grew to meanwhile."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import httpx


def send_head(port: int, path: str, length: int | None, headers: str = "") -> socket.socket:
    """A connection that has sent a POST's head (JSON, ``length`` bytes or chunked)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    size = (
        f"Content-Length: {length}\r\n" if length is not None else "Transfer-Encoding: chunked\r\n"
    )
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{size}{headers}\r\n".encode()
    )
    return sock


def read_answer(sock: socket.socket) -> tuple[int, str]:
    """The response's status and text: the server closes the connection after a refusal.

    Closing with the client's body unread makes the kernel reset the connection: the answer
    is read first, the reset ends the stream like an end of file (a browser does the same).
    """
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), (head + rest).decode(errors="replace")


def post_json(port: int, path: str, token: str, body: bytes) -> tuple[int, str]:
    """POST ``body`` whole with a bearer token; the status and the text of the answer."""
    sock = send_head(
        port, path, len(body), f"Authorization: Bearer {token}\r\nConnection: close\r\n"
    )
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(body)  # the server may answer and close before the end
    try:
        return read_answer(sock)
    finally:
        sock.close()


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


@dataclass
class Load:
    """What a request cost the served admin: its peak memory growth and the slowest answer
    other requests got meanwhile."""

    growth_mb: float = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def slowest_s(self) -> float:
        return max(self.latencies, default=0.0)


@contextmanager
def measured(port: int) -> Iterator[Load]:
    """Measure the block: the process's peak resident memory (the admin serves in this
    process) and /healthz's answer times, asked every 50 ms."""
    load = Load()
    done = threading.Event()

    def ping() -> None:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            while not done.is_set():
                started = time.monotonic()
                http.get("/healthz")
                load.latencies.append(time.monotonic() - started)
                done.wait(0.05)

    pinger = threading.Thread(target=ping)
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak starts again from the present size
    before = _peak_rss_mb()
    pinger.start()
    try:
        yield load
    finally:
        done.set()
        pinger.join()
        load.growth_mb = _peak_rss_mb() - before
