"""Process supervision: what a process is, whether it still runs, and stopping it.

One place for the procfs look-ups, the wait loops and the SIGTERM-then-SIGKILL sequence
that the embedded servers, the stack's workers and the crawl processes all need, and the
records by which `copytrack down` and `status` find the stack's processes: each process of
the stack (`up`, a worker, the scheduler, a crawl) is recorded in DATA/run/<pid>.json while
it lives. A record is a file its process holds an flock on: a record nobody holds belongs
to a process that is gone (even after kill -9), whatever process its pid now names, and is
removed by whoever finds it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

POLL = 0.05  # seconds between two looks at a process
KILL_WAIT = 5.0  # seconds a SIGKILLed process is given to disappear

_HAVE_PROCFS = os.path.isdir("/proc/self")
_KERNEL_THREAD = 0x00200000  # PF_KTHREAD in the flags of /proc/PID/stat
RUN_DIR = "run"  # DATA/run/HOSTNAME/PID.json: containers sharing DATA each have their pids


def proc_stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name: [0] state, [1] parent pid, …,
    [11] [12] user and system CPU ticks; None if there is no such process (or no procfs)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            # They follow the parenthesized name, which may itself contain ")".
            return fh.read().rpartition(")")[2].split() or None
    except OSError:
        return None


def proc_info(pid: int) -> tuple[str, str] | None:
    """(state letter, command line) of a process, or None if there is none."""
    if _HAVE_PROCFS:
        stat = proc_stat(pid)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
        return (stat[0], cmdline) if stat else None
    # No procfs (macOS): ask ps.
    try:
        out = subprocess.run(
            ["ps", "-o", "stat=", "-o", "command=", "-p", str(pid)],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    if not out:
        return None
    state, _, cmdline = out.partition(" ")
    return state[:1], cmdline


def descendants(pid: int) -> list[int]:
    """The processes under pid (its children, theirs, …), from procfs; [] without it."""
    if not _HAVE_PROCFS:
        return []
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        stat = proc_stat(entry.name) if entry.name.isdigit() else None
        if stat:  # not if it ended meanwhile
            children.setdefault(int(stat[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_running(pid: int, marker: str) -> bool:
    """True if pid is a live (non-zombie) process whose command line contains ``marker``,
    or has none yet.

    The marker tells the process apart from another that got its pid after it ended. A
    process just started has no command line for a moment: Linux lets `subprocess.Popen`
    return as soon as the exec replaced the child's memory, before it puts the arguments
    there (seen in 15% of starts on a quiet machine, most under load). Counted as not
    running, a crawl was failed as interrupted before it began. A kernel thread, which
    never has one, does not count.
    """
    info = proc_info(pid)
    if info is None or info[0] == "Z":
        return False
    if info[1]:
        return marker in info[1]
    stat = proc_stat(pid)
    return stat is not None and not int(stat[6]) & _KERNEL_THREAD


def pid_space() -> str:
    """Where a pid names a process: this host and, in a container, its PID namespace."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:  # no procfs
        namespace = ""
    return f"{socket.gethostname()} {namespace}".rstrip()


def wait_for(done: Callable[[], bool], timeout: float, poll: float = POLL) -> bool:
    """Poll until done() is true (True) or ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)
    return True


def kill(pid: int) -> None:
    """SIGKILL pid, and its whole process group when it leads one (a process started in a
    session of its own: its children go too)."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def terminate(
    pids: Iterable[int],
    gone: Callable[[int], bool],
    timeout: float,
    while_waiting: Callable[[int], object] | None = None,
) -> list[int]:
    """SIGTERM the processes, wait up to ``timeout`` seconds for ``gone(pid)``, then SIGKILL
    the rest (with their groups) and wait for them a little; returns the pids still there.

    ``while_waiting(pid)`` is called for each process still running at every poll (to wake
    a server blocked in accept(), say).
    """
    alive = [pid for pid in pids if not gone(pid)]
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)

    def all_gone() -> bool:
        alive[:] = [pid for pid in alive if not gone(pid)]
        if while_waiting is not None:
            for pid in alive:
                while_waiting(pid)
        return not alive

    if wait_for(all_gone, timeout):
        return []
    log.warning("pids %s ignored SIGTERM for %.0f s, killing them", alive, timeout)
    for pid in alive:
        kill(pid)
    if not wait_for(all_gone, KILL_WAIT):
        log.error("pids %s still present after SIGKILL", alive)
    return alive


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class StackProcess:
    """A live process of the stack recorded in DATA/run: `up`, a worker, the scheduler, a
    crawl."""

    pid: int
    role: str
    parent: int  # pid of the process that started it
    started_at: float
    record: Path


def records_dir(data_dir: Path) -> Path:
    """Where this host's processes are recorded. Only these: a pid names a process on its
    own host (container) only, and `down` must never signal another host's pid."""
    return data_dir / RUN_DIR / socket.gethostname()


@contextlib.contextmanager
def recorded(data_dir: Path, role: str) -> Iterator[None]:
    """Record this process in DATA/run for as long as the block runs."""
    run_dir = records_dir(data_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    pid = os.getpid()
    path, tmp = run_dir / f"{pid}.json", run_dir / f".{pid}.tmp"
    with open(tmp, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        entry = {"pid": pid, "role": role, "parent": os.getppid(), "started_at": time.time()}
        json.dump(entry, fh)
        fh.flush()
        # Locked before it appears under its real name: no reader can take it for stale.
        os.replace(tmp, path)
        try:
            yield
        finally:
            path.unlink(missing_ok=True)


def record_held(record: Path) -> bool:
    """True while some process holds the record's lock (its process, or its forks)."""
    try:
        with open(record) as fh:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def stack_processes(data_dir: Path) -> list[StackProcess]:
    """The live processes recorded for data_dir, oldest first; stale records are removed."""
    found = []
    for record in records_dir(data_dir).glob("*.json"):
        if not record_held(record):
            record.unlink(missing_ok=True)
            continue
        try:
            entry = json.loads(record.read_text())
            found.append(
                StackProcess(
                    pid=int(entry["pid"]),
                    role=str(entry["role"]),
                    parent=int(entry["parent"]),
                    started_at=float(entry["started_at"]),
                    record=record,
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            log.warning("ignoring unreadable process record %s", record)
    return sorted(found, key=lambda p: p.started_at)
