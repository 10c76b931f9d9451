"""`copytrack demo`, the README's first command, end to end on its own embedded servers."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tracker.servers import server_status


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
    findings = re.search(r"findings: (\d+) on (\d+) pages", out)
    assert findings and int(findings.group(1)) >= 10, out
    assert re.search(r"\d+% of [A-Z]-\S+ +copied at http://127\.0\.0\.1:\d+/", out)
    assert server_status(tmp_path / "data") == []  # the demo stops what it started
