"""Small faults, each answered in one line: a FIFO given to `check --jsonl` or `campaign
import` (reading it would wait forever), `status` on a full disk (one line per problem, not
the driver's dump), and a URL that redirects to itself (counted in its run)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pymongo.errors import OperationFailure

from tests.faults.helpers import copytrack, data_dir_env, fill_disk
from tests.loopback import Handler, served
from tracker.campaigns import Campaign, save_campaign, trigger_run, wait_for_run
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("args", [["check", "--jsonl"], ["campaign", "import"]])
def test_a_fifo_is_refused_at_once(tmp_path: Path, args: list[str]) -> None:
    fifo = tmp_path / "suspects.jsonl"
    os.mkfifo(fifo)
    env = data_dir_env(tmp_path / "data")
    try:
        done = copytrack([*args, str(fifo)], env, timeout=60, cwd=tmp_path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`copytrack {' '.join(args)}` waited on the FIFO")
    finally:
        copytrack(["down"], env)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    [line] = done.stderr.splitlines()  # `copytrack: …` or, from a campaign command, `Error: …`
    assert str(fifo) in line and "not a regular file" in line, line


class _Looping(Handler):
    """A home page linking to an article and to a URL that redirects to itself."""

    def do_GET(self) -> None:
        if self.path == "/loop":
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/":
            self.send_body(b'<html><body><a href="/loop">a</a> <a href="/article">b</a></body>')
        elif self.path == "/article":
            self.send_body(ARTICLE)
        else:
            self.send_body(b"", status=404)


ARTICLE = (
    "<html><body><article>"
    + "".join(
        f"<p>第{n}段正文，讲述了一个很长的故事，足够被识别为文章的主体内容。</p>" for n in range(8)
    )
    + "</article></body></html>"
).encode()


def test_a_url_redirecting_to_itself_is_counted(crawl_ctx: Context) -> None:
    with served(_Looping) as site:
        base = f"http://127.0.0.1:{site.server_port}"
        campaign = {"name": "loop", "seeds": [f"{base}/"], "delay": 0}
        save_campaign(crawl_ctx, Campaign.from_dict(campaign))
        run = wait_for_run(crawl_ctx, trigger_run(crawl_ctx, "loop"), timeout=120)
    assert run["state"] == "finished", run
    assert run["failed"] == {"redirect_loop": 1}, run
    [problem] = crawl_ctx.db.run_problems.find({"run_id": run["_id"], "outcome": "failed"})
    assert (problem["url"], problem["reason"]) == (f"{base}/loop", "redirect_loop")


def test_status_on_a_full_disk_says_each_problem_in_one_short_line(small_disk: Path) -> None:
    env = data_dir_env(small_disk)
    ctx = open_ready(Settings.from_env(env))
    try:
        fill_disk(small_disk)
        with pytest.raises(OperationFailure):  # its storage fails, as on a busy installation
            for n in range(1000):
                ctx.db.junk.insert_one({"_id": n, "bytes": os.urandom(100_000)})
    finally:
        ctx.close()
    status = copytrack(["status"], env)
    assert status.returncode == 1 and "Traceback" not in status.stderr, status.stderr
    problems = status.stdout.split("\nproblems\n", 1)[1].splitlines()
    assert any(line.strip().startswith("mongo does not answer") for line in problems), problems
    for line in status.stdout.splitlines():  # the reason, not the driver's dump of it
        assert len(line) <= 250 and "full error" not in line and "Topology" not in line, line
