"""`copytrack demo`, the README's first command, end to end on its own embedded servers."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tracker.runtime.servers import server_status

pytestmark = pytest.mark.slow


def test_demo_crawls_the_test_web_and_reports_findings(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env["COPYTRACK_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run(
        [sys.executable, "-m", "copytrack.cli", "demo", "--no-serve", "--masters", "20",
         "--pages", "40"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "library: 20 works" in out
    findings = re.search(r"crawled \d+ pages in \d+ s: (\d+) findings on (\d+) pages", out)
    assert findings and int(findings.group(1)) >= 10, out
    # Findings by work title, most copied first, and the run's state with its reason.
    counts = [int(n) for n in re.findall(r"^ +(\d+) × .+ \(up to \d+% of it copied\)$", out, re.M)]
    assert counts and counts == sorted(counts, reverse=True), out
    assert re.search(r"^run: .*fetched", out, re.M), out
    # Its deliberate failures (links to pages the test web does not have) are expected.
    assert "mostly failed" not in out and " failed as expected (links to pages " in out, out
    # No line per scanned page: the log stays quiet unless asked.
    assert "page scanned" not in done.stderr, done.stderr[-2000:]
    assert server_status(tmp_path / "data") == []  # the demo stops what it started


def test_demo_refuses_a_busy_admin_port_before_crawling(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env["COPYTRACK_DATA_DIR"] = str(tmp_path / "data")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "copytrack.cli", "demo", "--port", str(port)],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"port {port} on 127.0.0.1 is taken" in lines[0], done.stderr
    assert f"make demo PORT={port + 1}" in lines[0]
    assert not (tmp_path / "data").exists()  # nothing started, nothing crawled


def test_the_demos_admin_runs_with_a_worker_so_run_now_completes(tmp_path: Path) -> None:
    """The demo serves its admin with a Celery worker beside it: a run started from the
    admin is crawled and scanned to the end, and no page says that no worker runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env |= {"COPYTRACK_DATA_DIR": str(tmp_path / "data"), "PYTHONUNBUFFERED": "1"}
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    errors = (tmp_path / "demo.err").open("w")  # a file: a full pipe would block the demo
    demo = subprocess.Popen(
        [sys.executable, "-m", "copytrack.cli", "demo", "--port", str(port), "--masters", "8",
         "--pages", "12"],
        env=env, stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        lines = []
        assert demo.stdout is not None
        for line in demo.stdout:
            lines.append(line)
            if line.startswith("admin: "):
                break
        out = "".join(lines)
        # The deliberate 404s of the test web are counted apart, as expected.
        assert "mostly failed" not in out, out
        assert re.search(
            r"^run: \d+ fetched; (.+ )?\d+ failed as expected \(links to pages", out, re.M
        )
        password = re.search(r"password (\S+)", lines[-1]).group(1)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, follow_redirects=True, timeout=30) as http:
            csrf = _login(http, "demo", password)
            started = http.post("/campaigns/demo-pirate-sites/run", data={"csrf_token": csrf})
            assert started.status_code == 200 and "started" in started.text
            run_id = re.search(r"Run ([0-9a-f]{24}) of", started.text).group(1)
            deadline = time.monotonic() + 300
            while (progress := http.get(f"/runs/{run_id}/progress").json())["state"] != "finished":
                assert progress["state"] not in ("failed", "cancelled"), progress
                assert time.monotonic() < deadline, progress
                time.sleep(1)
            assert progress["waiting"] is None
            assert "No worker is running" not in http.get(f"/runs/{run_id}").text
    finally:
        demo.send_signal(signal.SIGINT)
        try:
            demo.wait(timeout=60)
        finally:
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGKILL)
            errors.close()
    assert server_status(tmp_path / "data") == []  # the demo stops what it started


def _login(http: httpx.Client, name: str, password: str) -> str:
    """Log in through the form; returns the session's CSRF token."""
    token = re.compile(r'name="csrf_token" value="([^"]+)"')
    form = http.get("/login").text
    http.post("/login", data={"name": name, "password": password,
                              "csrf_token": token.search(form).group(1)})  # fmt: skip
    return token.search(http.get("/account").text).group(1)
