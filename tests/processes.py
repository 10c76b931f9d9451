"""Helpers for tests that start copytrack processes: their environment, their process group,
and waiting for what they do."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from copytrack.commands.ops import COPYTRACK_COMMAND
from tracker.context import Context
from tracker.core.config import Settings
from tracker.runtime.processes import kill, proc_stat
from tracker.runtime.servers import Endpoints


def clean_env(**copytrack: str) -> dict[str, str]:
    """This environment without any COPYTRACK_* variable, plus the given ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COPYTRACK_")}
    env.update(copytrack)
    return env


def installation_env(endpoints: Endpoints, settings: Settings, **extra: str) -> dict[str, str]:
    """clean_env with the settings of one installation on its servers, plus extra."""
    on_servers = replace(settings, mongo_url=endpoints.mongo_url, redis_url=endpoints.redis_url)
    return clean_env(**{**on_servers.to_env(), **extra})


@contextlib.contextmanager
def process_group(
    cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """cmd in its own session, output appended to log; its group is killed on the way out."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        kill(proc.pid)  # and its group: the worker's pool, the crawl's extraction processes
        proc.wait(timeout=10)


@contextlib.contextmanager
def worker_process(
    ctx: Context,
    log: Path,
    queues: str = "scan",
    concurrency: int = 1,
    extra_env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """`copytrack worker` on ctx's installation and the queues, in its own process group,
    killed on the way out."""
    env = installation_env(
        ctx.endpoints,
        ctx.settings,
        # The crawls it runs may fetch what ctx's may (the test web on loopback).
        COPYTRACK_ALLOW_PRIVATE_NETWORKS=str(int(ctx.settings.allow_private_networks)),
        **(extra_env or {}),
    )
    cmd = [*COPYTRACK_COMMAND, "worker", "--queues", queues, "--concurrency", str(concurrency)]
    with process_group(cmd, env, log) as proc:
        yield proc


def wait_until(done: Callable[[], Any], timeout: float, what: str, log: Path | None = None) -> Any:
    """Poll until done() is truthy and return it; fail with the log's warnings and errors
    and its end otherwise."""
    deadline = time.monotonic() + timeout
    while not (result := done()):
        if time.monotonic() > deadline:
            text = log.read_text(errors="replace") if log and log.exists() else ""
            alarms = [line for line in text.splitlines() if _ALARM.search(line)][-40:]
            shown = "\n".join(["warnings and errors:", *alarms, "end:", text[-4000:]])
            pytest.fail(f"no {what} within {timeout:.0f} s\n{shown}")
        time.sleep(0.1)
    return result


_ALARM = re.compile(r"\b(WARNING|ERROR|CRITICAL)\b|Traceback")


def process_state(pid: int) -> str | None:
    """The state letter of a process (R, S, Z…), None once it is gone."""
    stat = proc_stat(pid)
    return stat[0] if stat else None


def kill_crawl(pid: int) -> None:
    """SIGKILL a crawl process (as the OOM killer would), then what is left of its group.

    It stays a zombie until this process (which started it) reaps it: Popen does, the
    next time it starts a process.
    """
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: process_state(pid) in ("Z", None), 10, f"death of pid {pid}")
    # Its extraction processes (its process group) end once they notice; no test waits.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
