"""Doubles for the network tests: a scripted DNS and a loopback listener that counts.

``scripted_crawl`` runs a campaign in a real crawl process resolving through a
ScriptedLookup. No test here contacts a real private or public address: test host names
(``*.test``, which no real DNS answers) resolve through ``ScriptedLookup`` to loopback
listeners, and a guard that works refuses them before any connection is made.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

from tests.loopback import Handler, running
from tests.processes import installation_env
from tracker.campaigns import crawl_log_path, start_run, wait_for_run
from tracker.context import Context

#: Environment variable carrying a ScriptedLookup's script to a crawl process.
SCRIPT_ENV = "COPYTRACK_TEST_DNS_SCRIPT"
REPO = Path(__file__).resolve().parents[2]

PARAGRAPH = "<p>这是第{n}段正文，讲述了一个很长的故事，足够被识别为文章的主体内容。</p>"
ARTICLE = (
    "<html><head><meta charset='utf-8'><title>文章</title></head><body><article>"
    + "".join(PARAGRAPH.format(n=n) for n in range(8))
    + "</article></body></html>"
).encode()


class ScriptedLookup:
    """A DNS for test host names. Each look-up of a host takes the host's next answer: a
    list of addresses, or None for a failed look-up (a SERVFAIL); the last one repeats.
    Unknown names do not resolve."""

    def __init__(self, script: dict[str, list[list[str] | None]]) -> None:
        self.script = script
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls) -> ScriptedLookup:
        return cls(json.loads(os.environ.get(SCRIPT_ENV, "{}")))

    def __call__(self, host: str) -> list[str]:
        with self._lock:
            answers = self.script.get(host)
            if not answers:
                raise socket.gaierror(socket.EAI_NONAME, f"{host}: Name or service not known")
            n = self.calls.get(host, 0)
            self.calls[host] = n + 1
        answer = answers[min(n, len(answers) - 1)]
        if answer is None:
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return answer


class _Article(Handler):
    def do_GET(self) -> None:
        self.server.paths.append(self.path)  # type: ignore[attr-defined]
        if self.path.startswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", self.server.redirect_to)  # type: ignore[attr-defined]
            self.end_headers()
            return
        self.send_body(ARTICLE)


class CountingServer(ThreadingHTTPServer):
    """Serves an article (or a redirect to ``redirect_to`` under /redirect) and counts every
    connection it accepts: the proof that a refused address was never connected to."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Article)
        self.connections = 0
        self.paths: list[str] = []
        self.redirect_to = ""

    def verify_request(self, request: object, client_address: object) -> bool:
        self.connections += 1
        return True


@contextlib.contextmanager
def listening(host: str = "127.0.0.1", port: int = 0) -> Iterator[CountingServer]:
    """A CountingServer on ``host`` (a loopback address), stopped on the way out."""
    server = CountingServer((host, port))
    with running(server):
        yield server


def scripted_crawl(ctx: Context, name: str, script: dict, allow_private: bool) -> dict:
    """One run of campaign ``name`` in a real crawl process whose resolver looks names up
    in ``script``; returns the finished run."""
    run_id = start_run(ctx, name)
    env = installation_env(
        ctx.endpoints,
        ctx.settings,
        COPYTRACK_ALLOW_PRIVATE_NETWORKS="1" if allow_private else "0",
        **{SCRIPT_ENV: json.dumps(script)},
    )
    log = crawl_log_path(ctx, run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        subprocess.run(
            [sys.executable, "-m", "tests.security.guarded_crawl",
             "--campaign", name, "--run-id", str(run_id)],
            env={**env, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")},
            stdout=out, stderr=subprocess.STDOUT, timeout=180, check=False,
        )  # fmt: skip
    return wait_for_run(ctx, run_id, timeout=120)
