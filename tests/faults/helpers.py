"""What the fault tests share: pages that copy works, scans sent to the queue, the servers of
a data dir, and `copytrack` run as a user runs it, with its one-line failures."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bson import ObjectId

from copytrack.commands.ops import COPYTRACK_COMMAND
from testbed import attacks
from testbed.distractors import distractors
from tests.corpus import texts
from tests.processes import clean_env, wait_until
from tracker.celery_app import sender_app
from tracker.context import Context
from tracker.core.config import Settings
from tracker.runtime.servers import ServerStatus, server_status
from tracker.scanning.pages import PageInput, store_page

#: `copytrack worker` on the scan queue.
SCAN_WORKER = [*COPYTRACK_COMMAND, "worker", "--queues", "scan", "--concurrency", "1"]


def embedded_env(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment of a process on the embedded servers of settings' data dir: no URLs,
    so it finds them (and follows them) through the data dir, as a user's processes do."""
    return clean_env(
        COPYTRACK_DATA_DIR=str(settings.data_dir),
        COPYTRACK_MONGO_DB=settings.mongo_db,
        COPYTRACK_INDEX_SNAPSHOT=str(settings.index_snapshot).lower(),
        **extra,
    )


def data_dir_env(data_dir: Path) -> dict[str, str]:
    """The environment of a `copytrack` of its own, on the embedded servers of data_dir."""
    return clean_env(COPYTRACK_DATA_DIR=str(data_dir))


def servers_of(data_dir: Path) -> list[int]:
    """Processes whose command line names the data dir (its embedded servers), found
    without the state file, which a full disk may have kept from being written."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if proc.name.isdigit() and str(data_dir).encode() in cmdline:
            pids.append(int(proc.name))
    return pids


def fill_disk(data_dir: Path) -> Path:
    """Write a file in data_dir until its disk has no room left; returns the file."""
    filler = data_dir / "filler"
    chunk = b"\0" * 2**20
    with filler.open("wb", buffering=0) as out:
        try:
            while True:
                out.write(chunk)
        except OSError as err:
            assert err.errno == errno.ENOSPC, err
    return filler


def novel_stretches(count: int, size: int = 600) -> list[str]:
    """``count`` different texts of ``size`` characters: stretches of the novels back to
    back, then, when the novels hold fewer (the bundled corpus of a clone alone: ~140),
    stretches of Markov chains over their characters (`testbed.distractors`), which copy
    none of them. Overlapping stretches would not do: each would share its fingerprints
    with dozens of neighbours, more works than the matcher counts a fingerprint in
    (`MatchSettings.df_cut`), and a copy of one would match nothing."""
    novels = texts("zh_novel", 400)
    stretches = [
        text[start : start + size] for text in novels for start in range(0, len(text) - size, size)
    ][:count]
    missing = count - len(stretches)
    if missing > 0:
        chains, length = [], 0
        for _, chain in distractors([("zh", text) for text in novels], missing):
            chains.append(chain)
            length += len(chain)
            if length >= missing * size:
                break
        made = "".join(chains)
        stretches += [made[start : start + size] for start in range(0, length - size + 1, size)]
    return stretches[:count]


def works_file(tmp_path: Path, works: list[str]) -> Path:
    """A JSONL file of works w0, w1, ... with these texts, for `library add`."""
    path = tmp_path / "works.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for n, text in enumerate(works):
            out.write(json.dumps({"id": f"w{n}", "text": text}, ensure_ascii=False) + "\n")
    return path


@contextmanager
def adding(
    works: Path, env: dict[str, str], batch: int, cwd: Path
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """`copytrack library add --batch BATCH WORKS` running as its own process, once it has
    printed the first line of its first batch (given with the process)."""
    with subprocess.Popen(
        [*COPYTRACK_COMMAND, "library", "add", "--batch", str(batch), str(works)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    ) as run:
        assert run.stdout is not None and run.stderr is not None
        first = run.stdout.readline()
        assert first.startswith("added\t"), first + run.stderr.read()
        yield run, first


def add_statuses(stdout: str) -> dict[str, str]:
    """work id -> status, from `library add`'s STATUS<TAB>ID<TAB>TITLE lines."""
    return {
        fields[1]: fields[0]
        for fields in (line.split("\t") for line in stdout.splitlines())
        if len(fields) == 3
    }


def copytrack(
    args: list[str], env: dict[str, str], timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """`copytrack ARGS` as its own process, as a user runs it."""
    return subprocess.run(
        [*COPYTRACK_COMMAND, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **kwargs,
    )


def one_line_failure(done: subprocess.CompletedProcess[str], *words: str) -> str:
    """The command failed with one line and no traceback; returns that line, which must
    contain every one of words."""
    assert done.returncode != 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("copytrack: ")]
    assert len(lines) == 1, done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def one_error_per_place(stderr: str, expected: dict[str, str]) -> None:
    """`library add`'s stderr holds one ``error:`` line per place (``file`` or
    ``file:line``) of expected, holding its reason, and no other."""
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == len(expected), stderr
    for where, reason in expected.items():
        [line] = [line for line in errors if f"{where}:" in line or line.endswith(where)]
        assert reason in line, line


def send_scans(redis_url: str, page_ids: list[ObjectId]) -> None:
    """Queue scans as tracker.tasks.enqueue_scan does (same task name, same route), through
    a Celery app of the test's own: the module-level app keeps its first broker."""
    sender = sender_app("fault-tests", redis_url, Settings())
    try:
        for page_id in page_ids:
            sender.send_task("tracker.scan_page", args=[str(page_id)])
    finally:
        sender.close()


def pirate_copies(works: list[str], per_work: int, seed: int = 3) -> list[str]:
    """``per_work`` pirated copies of each work: ads sprinkled in, each copy differently."""
    rng = random.Random(seed)
    return [attacks.insert_ads(attacks.reflow(w), rng) for _ in range(per_work) for w in works]


def store_pages(ctx: Context, texts: list[str], prefix: str) -> list[ObjectId]:
    return [
        store_page(ctx, PageInput(url=f"http://{prefix}.example/{n}", text=text))[0]
        for n, text in enumerate(texts)
    ]


def findings_of(ctx: Context) -> set[tuple[ObjectId, int]]:
    """(page, master) of every finding; fails on a duplicate."""
    docs = list(ctx.db.findings.find({}, {"page_id": 1, "master_id": 1}))
    found = {(d["page_id"], d["master_id"]) for d in docs}
    assert len(found) == len(docs), "duplicate findings"
    return found


def scanned(ctx: Context) -> int:
    return ctx.db.pages.count_documents({"scanned_at": {"$ne": None}})


def server(settings: Settings, name: str) -> ServerStatus:
    [found] = [s for s in server_status(settings.data_dir) if s.name == name]
    return found


def kill_server(settings: Settings, name: str, sig: signal.Signals = signal.SIGKILL) -> int:
    """Signal an embedded server and wait until it has exited; returns its port.

    A busy worker may start the server again before the first poll: a new pid in the
    state file means the victim is gone too."""
    victim = server(settings, name)
    os.kill(victim.pid, sig)

    def exited() -> bool:
        now = server(settings, name)
        return now.pid != victim.pid or not now.alive

    wait_until(exited, 20, f"{name} exit")
    return victim.port


def processes_of(data_dir: Path) -> set[int]:
    """Pids of every process whose command line names data_dir (servers, workers)."""
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(data_dir) in cmdline:
            found.add(int(entry.name))
    return found
