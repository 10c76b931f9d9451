"""A small HTTP server on loopback in a thread, for tests that fetch a few pages."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from socketserver import BaseServer
from typing import Any

from testbed.testweb.server import LoopbackServer


@contextmanager
def served(handler: type[BaseHTTPRequestHandler], **state: Any) -> Iterator[ThreadingHTTPServer]:
    """``handler`` served on 127.0.0.1 (a free port) until the block ends; ``state`` becomes
    attributes of the server, where handlers find it (``self.server.NAME``)."""
    server = LoopbackServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True  # a handler still writing (a trickle) does not hold the end
    for name, value in state.items():
        setattr(server, name, value)
    with running(server):
        yield server


@contextmanager
def running(server: BaseServer) -> Iterator[None]:
    """``server`` serving in a thread until the block ends, then closed."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        thread.join()
        server.server_close()


class Handler(BaseHTTPRequestHandler):
    """A request handler that answers with a body in one call and logs nothing."""

    def send_body(self, body: bytes, media_type: str = "text/html; charset=utf-8",
                  status: int = 200) -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", media_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass
