"""`copytrack demo`, the README's first command, end to end on its own embedded servers."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tracker.servers import server_status

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
