"""Serve a ``TestWeb`` on loopback: one threaded HTTP server per site, each on its own port.

One port per site gives every site its own robots.txt and origin without relying on
``*.localhost`` name resolution. The query string is ignored when looking a path up, so
tracking-parameter duplicates serve the same article; every request is logged.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

from .generator import Resource, TestWeb
from .pages import BASE, error_page

_NOT_FOUND = Resource(error_page(404, "Not Found").encode(), status=404)


class LoggedRequest(NamedTuple):
    """One request a site answered: the raw request target (with query) and the status."""

    site: str
    path: str
    status: int


class _Handler(BaseHTTPRequestHandler):
    server: _SiteServer
    server_version = "copytrack-testweb/1.0"
    timeout = 10  # an idle client cannot hold up stop() for longer

    def do_GET(self) -> None:
        self._respond(with_body=True)

    def do_HEAD(self) -> None:
        self._respond(with_body=False)

    def _respond(self, with_body: bool) -> None:
        site = self.server
        resource = site.resources.get(unquote(urlsplit(self.path).path), _NOT_FOUND)
        if resource.delay:
            site.running._stopping.wait(resource.delay)  # stop() cuts the wait short
        body = resource.body
        if resource.templated:
            body = body.replace(BASE.encode(), site.base_url.encode())
        site.running._record(LoggedRequest(site.site, self.path, resource.status))
        self.send_response(resource.status)
        if resource.location:
            self.send_header("Location", site.base_url + resource.location)
        self.send_header("Content-Type", resource.content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if with_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: requests go to ``RunningWeb.requests`` instead of stderr."""


class LoopbackServer(ThreadingHTTPServer):
    """A threading HTTP server to which a client hanging up is no error: a crawler that
    stops reading a huge page, or gives up on a slow one, is expected."""

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _SiteServer(LoopbackServer):
    # Handler threads are joined on close (block_on_close), so none outlive stop().
    daemon_threads = False

    def __init__(
        self, host: str, port: int, site: str, resources: dict[str, Resource], running: RunningWeb
    ) -> None:
        super().__init__((host, port), _Handler)
        self.site = site
        self.resources = resources
        self.running = running
        self.base_url = f"http://{host}:{self.server_port}"


class RunningWeb:
    """The sites being served: ``base_urls`` per site, the request log, ``stop()``."""

    def __init__(self) -> None:
        self.base_urls: dict[str, str] = {}
        self.requests: list[LoggedRequest] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._servers: list[_SiteServer] = []
        self._threads: list[threading.Thread] = []

    def url(self, site: str, path: str = "/") -> str:
        """Absolute URL of ``path`` on ``site``."""
        return self.base_urls[site] + path

    def _record(self, request: LoggedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _start(self, site: str, server: _SiteServer) -> None:
        self._servers.append(server)
        self.base_urls[site] = server.base_url
        thread = threading.Thread(
            target=server.serve_forever, name=f"testweb-{site}", kwargs={"poll_interval": 0.1}
        )
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        """Stop every site and wait for its threads; safe to call twice."""
        self._stopping.set()
        for server, thread in zip(self._servers, self._threads, strict=True):
            server.shutdown()
            thread.join()
            server.server_close()
        self._servers.clear()
        self._threads.clear()

    def __enter__(self) -> RunningWeb:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def serve(web: TestWeb, host: str = "127.0.0.1", port_base: int = 0) -> RunningWeb:
    """Serve every site of ``web`` on ``host`` (loopback only).

    Ports are free ones picked by the OS, or ``port_base``, ``port_base + 1``, … in site
    order when ``port_base`` is given.
    """
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"the test web only binds loopback addresses, not {host}")
    running = RunningWeb()
    try:
        for i, (site, resources) in enumerate(web.sites.items()):
            port = port_base + i if port_base else 0
            running._start(site, _SiteServer(host, port, site, resources, running))
    except BaseException:
        running.stop()
        raise
    return running
