"""`copytrack worker | up | down | status`: run, stop and inspect the stack of a data dir.

The stack is the embedded servers (tracker.runtime.servers, recorded in DATA/servers.json) plus
the processes run on them: `up`, workers, schedulers and crawls, each recorded in
DATA/run/<pid>.json while it lives (`tracker.runtime.processes.recorded`), so that `down` and
`status` find them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click
import redis
from pymongo.errors import PyMongoError

from fingerprinter import DEFAULT_PARAMS
from tracker.celery_app import QUEUES, app, configure
from tracker.context import Context, open_index
from tracker.core.config import Settings
from tracker.core.failures import first_line
from tracker.core.times import mongo_client
from tracker.monitoring.health import health, unprobed
from tracker.runtime.processes import (
    StackProcess,
    record_held,
    recorded,
    stack_processes,
    terminate,
)
from tracker.runtime.servers import (
    MONGO,
    VALKEY,
    Endpoints,
    ServerStatus,
    ensure_servers,
    server_status,
    stop_servers,
    stopping,
)

log = logging.getLogger(__name__)

WORKER_STOP_TIMEOUT = 30.0  # a worker's warm shutdown waits for its running tasks
# A crawl asked to stop finishes the requests under way and records its run as interrupted.
CRAWL_STOP_TIMEOUT = 30.0
_POLL = 0.1
#: Runs the copytrack CLI with this interpreter, wherever the console script is (or isn't).
COPYTRACK_COMMAND = [
    sys.executable, "-c", "from copytrack.cli import run; run()"
]  # fmt: skip


# --------------------------------------------------------------------------- process records


def _stop(pid: int, gone: Callable[[], bool], timeout: float) -> None:
    """SIGTERM pid (a Celery worker then finishes its running tasks); SIGKILL after timeout.

    A killed worker's unfinished tasks are not lost: they were not acknowledged, so Redis
    hands them out again after the visibility timeout.
    """
    terminate([pid], lambda _pid: gone(), timeout)


def _stop_recorded_process(proc: StackProcess, timeout: float) -> None:
    """_stop a recorded process: it is gone once its record is let go."""
    _stop(proc.pid, lambda: not record_held(proc.record), timeout)


# --------------------------------------------------------------------------- worker


def _parse_queues(_ctx: click.Context, _param: click.Parameter, value: str) -> list[str]:
    queues = [q.strip() for q in value.split(",") if q.strip()]
    unknown = sorted(set(queues) - set(QUEUES))
    if not queues or unknown:
        raise click.BadParameter(
            f"unknown queue(s) {', '.join(unknown) or '(none given)'}: "
            f"choose among {', '.join(QUEUES)}"
        )
    return queues


@click.command()
@click.option(
    "--queues",
    "-Q",
    default=",".join(QUEUES),
    show_default=True,
    callback=_parse_queues,
    help="Comma-separated queues to consume.",
)
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(min=1),
    default=None,
    help="Pool processes running tasks [default: one per CPU].",
)
def worker(queues: list[str], concurrency: int | None) -> None:
    """Run a Celery worker in this process, on the configured or embedded servers.

    Embedded servers are started if they are not running, and keep running after the
    worker stops (`copytrack down` stops them). SIGTERM or Ctrl-C: the worker finishes
    its running tasks, then exits.
    """
    from tracker import tasks  # here, not at the top: the other commands need no tasks

    settings = Settings.from_env()
    configure(app, ensure_servers(settings), settings)
    argv = [
        "worker",
        "--queues", ",".join(queues),
        "--loglevel", settings.log_level,
        # Unique per process: Celery warns about two workers of one name on a host.
        "--hostname", f"copytrack-{os.getpid()}@%h",
        # Mingle (revoked-task sync at startup) and gossip (every worker listening to
        # every other) cost a startup wait and chatter; copytrack uses neither.
        "--without-mingle", "--without-gossip",
    ]  # fmt: skip
    if concurrency:
        argv += ["--concurrency", str(concurrency)]
    with recorded(settings.data_dir, "worker"):
        # The app with the tasks registered. celery-types says start never returns; it
        # returns the command's exit status.
        code: int | None = tasks.app.start(argv)
    sys.exit(code or 0)


# --------------------------------------------------------------------------- up


@dataclass
class _Child:
    name: str
    proc: subprocess.Popen[bytes]
    pump: threading.Thread


def _pump(name: str, stream: IO[bytes]) -> None:
    """Copy a child's output to stderr, each line prefixed with the child's name."""
    for raw in iter(stream.readline, b""):
        sys.stderr.write(f"{name:<7}| {raw.decode(errors='replace')}")
        sys.stderr.flush()


def start_child(name: str, args: list[str], env: dict[str, str]) -> _Child:
    proc = subprocess.Popen(
        [*COPYTRACK_COMMAND, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        # Own session and process group: the terminal's Ctrl-C reaches `up` only, which
        # then stops the children in order, and the group lets `up` kill what remains.
        start_new_session=True,
    )
    assert proc.stdout is not None
    pump = threading.Thread(target=_pump, args=(name, proc.stdout), daemon=True)
    pump.start()
    log.info("started %s (pid %d)", name, proc.pid)
    return _Child(name, proc, pump)


def stop_child(child: _Child) -> None:
    _stop(child.proc.pid, lambda: child.proc.poll() is not None, WORKER_STOP_TIMEOUT)
    # Whatever is left of its group (pool processes of a killed worker) goes too.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.proc.pid, signal.SIGKILL)
    child.proc.wait()
    child.pump.join(timeout=5)
    log.info("stopped %s", child.name)


def _services(
    concurrency: int | None, admin_port: int, crawl_dispatch: str
) -> list[tuple[str, list[str]]]:
    """What `up` runs as child processes: (name, copytrack arguments), started in order.

    With crawls dispatched to the crawl queue, a worker of its own takes them: crawls
    last minutes, and in the scan worker's pool they could hold every process while
    their own pages wait to be scanned (and the crawls, paused on the full scan queue,
    wait for those scans).
    """
    pool = ["--concurrency", str(concurrency)] if concurrency else []
    other_queues = ",".join(q for q in QUEUES if q != "crawl")
    services = [("worker", ["worker", "--queues", other_queues, *pool])]
    if crawl_dispatch == "queue":
        services.append(("crawler", ["worker", "--queues", "crawl", *pool]))
    services.append(("scheduler", ["scheduler"]))
    services.append(("admin", ["admin", "--port", str(admin_port)]))
    return services


def _server_urls(settings: Settings) -> tuple[tuple[str, str | None], ...]:
    """(server name, configured URL or None for the embedded server)."""
    return (MONGO, settings.mongo_url), (VALKEY, settings.redis_url)


def _interrupt(_signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt


def interrupt_on_termination() -> None:
    """Let SIGTERM and SIGHUP take the same way out as Ctrl-C: through the cleanup code."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)


def _print_stack(settings: Settings, children: list[_Child]) -> None:
    click.echo("copytrack is up; Ctrl-C stops it")
    click.echo(f"  data dir  {settings.data_dir}")
    for server in server_status(settings.data_dir):
        if server.answering:
            click.echo(
                f"  {server.name:<8}  {_without_credentials(server.url)}"
                f"  (pid {server.pid}, log {server.log_path})"
            )
    for name, url in _server_urls(settings):
        if url:
            click.echo(f"  {name:<8}  {_without_credentials(url)}  (configured)")
    for child in children:
        click.echo(f"  {child.name:<8}  pid {child.proc.pid}; its log follows on stderr")
    sys.stdout.flush()


@click.command()
@click.option(
    "--concurrency",
    "-c",
    type=click.IntRange(min=1),
    default=None,
    help="Pool processes of the worker [default: one per CPU].",
)
@click.option(
    "--admin-port",
    type=click.IntRange(1, 65535),
    default=8000,
    show_default=True,
    help="Port of the admin web app on 127.0.0.1.",
)
def up(concurrency: int | None, admin_port: int) -> None:
    """Run the stack in the foreground: servers, a worker, the scheduler and the admin.

    Logs go to stderr. Ctrl-C or SIGTERM stops everything `up` started: the children (the
    worker after its running tasks), then the embedded servers, if `up` started them.
    Exit status 1 if a child process died on its own.
    """
    settings = Settings.from_env()
    interrupt_on_termination()
    needed = {name for name, url in _server_urls(settings) if url is None}
    running = {s.name for s in server_status(settings.data_dir) if s.answering}
    # stop_servers stops the data dir's servers together: if `up` has to start one, both
    # stop with it (the other was only left over by an earlier command).
    own_servers = bool(needed - running)
    children: list[_Child] = []
    code = 0
    # Recorded until the stack it started is down: `copytrack down` waits for it.
    with recorded(settings.data_dir, "up"):
        try:
            ensure_servers(settings)
            # Children find the embedded servers as any command does, through the data
            # dir's state file: so they follow a server that died and came back.
            env = {**os.environ, **settings.to_env()}
            for name, args in _services(concurrency, admin_port, settings.crawl_dispatch):
                children.append(start_child(name, args, env))
            _print_stack(settings, children)
            while not (dead := [c for c in children if c.proc.poll() is not None]):
                time.sleep(0.5)
            log.error("%s exited with code %d; stopping", dead[0].name, dead[0].proc.returncode)
            code = 1
        except KeyboardInterrupt:
            log.info("stopping: the worker first finishes its running tasks")
        finally:
            # A second Ctrl-C must not cut the cleanup short; every step has a timeout.
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_IGN)
            _stop_stack(settings, children, own_servers)
    sys.exit(code)


def _stop_stack(settings: Settings, children: list[_Child], own_servers: bool) -> None:
    """`up` on its way out: its children, then, if it started the servers, the crawls of
    the data dir (its scheduler's among them: they would find no servers) and the servers;
    meanwhile no process starts a server of the data dir again (`stopping`)."""
    with stopping(settings.data_dir) if own_servers else contextlib.nullcontext():
        for child in reversed(children):
            stop_child(child)
        if not own_servers:
            log.info("leaving the servers and the crawls running: `up` did not start them")
            return
        for crawl in _stop_recorded(settings.data_dir, ["crawl"], CRAWL_STOP_TIMEOUT):
            log.info("stopped crawl (pid %d)", crawl.pid)
        if stop_servers(settings.data_dir):
            log.info("stopped the embedded servers")


def _stop_recorded(data_dir: Path, roles: list[str], timeout: float) -> list[StackProcess]:
    """Stop the recorded processes of these roles, each waited for until its record is let
    go (SIGKILL after ``timeout``); returns them."""
    procs = [p for p in stack_processes(data_dir) if p.role in roles]
    for proc in procs:
        _stop_recorded_process(proc, timeout)
    return procs


# --------------------------------------------------------------------------- down


@click.command()
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=WORKER_STOP_TIMEOUT,
    show_default=True,
    help="Seconds a worker gets to finish its running tasks before it is killed.",
)
def down(timeout: float) -> None:
    """Stop the stack of the data dir: crawls, workers and schedulers, `up` processes, then
    the embedded servers; returns once each is gone. Meanwhile no process starts a server
    of the data dir (a worker finishing its tasks would start them again)."""
    settings = Settings.from_env()
    data_dir = settings.data_dir
    stopped = False
    with stopping(data_dir) if data_dir.is_dir() else contextlib.nullcontext():
        procs = stack_processes(data_dir)
        up_pids = {p.pid for p in procs if p.role == "up"}
        # Crawls first, while the servers run: each records its run as interrupted (the
        # campaign's next run resumes it). Then workers and schedulers, but those an `up`
        # started, which it stops itself before the servers. Then the `up` processes.
        order = [p for p in procs if p.role == "crawl"]
        order += [p for p in procs if p.role not in ("crawl", "up") and p.parent not in up_pids]
        order += [p for p in procs if p.role == "up"]
        for proc in order:
            # An `up` waits for its worker, then for the servers it stops (20 s at most).
            allowance = {"crawl": CRAWL_STOP_TIMEOUT, "up": timeout + 30.0}.get(proc.role, timeout)
            _stop_recorded_process(proc, allowance)
            click.echo(f"stopped {proc.role} (pid {proc.pid})")
            stopped = True
        if stop_servers(data_dir):
            click.echo("stopped the embedded servers")
            stopped = True
    if not stopped:
        click.echo(f"nothing was running in {data_dir}")


# --------------------------------------------------------------------------- status


def _without_credentials(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    netloc, slash, path = rest.partition("/")
    return f"{scheme}{sep}{netloc.rpartition('@')[2]}{slash}{path}"


#: (name, configured URL, recorded embedded server) of each server.
_Found = list[tuple[str, str | None, ServerStatus | None]]


def _found_servers(settings: Settings) -> _Found:
    """The servers `status` reports on; starts nothing."""
    recorded = {s.name: s for s in server_status(settings.data_dir)}
    return [(name, url, recorded.get(name)) for name, url in _server_urls(settings)]


def _servers_section(settings: Settings, found: _Found) -> None:
    click.echo(f"servers (data dir {settings.data_dir})")
    for name, configured, server in found:
        if configured:
            click.echo(f"  {name:<12} configured  {_without_credentials(configured)}")
        elif server is None:
            click.echo(f"  {name:<12} not running (`copytrack up` starts it)")
        else:
            state = "answering" if server.answering else "NOT ANSWERING" if server.alive else "dead"
            click.echo(
                f"  {name:<12} pid {server.pid:<8} port {server.port:<6} {state:<13} "
                f"{_without_credentials(server.url)}"
            )


def _status_context(settings: Settings, found: _Found) -> Context | None:
    """A Context on the servers found (answering or not: health() tells), connecting lazily
    and writing nothing but health's probe records; None when an embedded server is not
    running at all."""
    urls = {}
    for name, configured, server in found:
        if configured:
            urls[name] = configured
        elif server is not None:
            urls[name] = server.url
    if set(urls) != {MONGO, VALKEY}:
        return None
    mongo = mongo_client(urls[MONGO], serverSelectionTimeoutMS=5000)
    # The index's memory figure walks every index key: a generous timeout for a big index.
    client = redis.Redis.from_url(urls[VALKEY], socket_timeout=30, socket_connect_timeout=5)
    return Context(
        settings,
        Endpoints(urls[MONGO], urls[VALKEY], embedded=not all(c for _, c, _ in found)),
        mongo[settings.mongo_db],
        client,
        open_index(settings, client, DEFAULT_PARAMS),
    )


def _not_running(found: _Found) -> str:
    missing = " and ".join(name for name, configured, server in found if not (configured or server))
    return f"embedded {missing} not running (`copytrack up` starts it)"


def _processes_section(settings: Settings) -> None:
    click.echo("processes")
    procs = stack_processes(settings.data_dir)
    for proc in procs:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(proc.started_at))
        click.echo(f"  {proc.role:<12} pid {proc.pid:<8} since {since}")
    if not procs:
        click.echo("  none (`copytrack up` or `copytrack worker` starts them)")


def _health_section(report: dict[str, Any]) -> None:
    click.echo("queues (tasks waiting)")
    if report["queues"] is None:
        click.echo("  unavailable (see problems)")
    else:
        for queue, depth in report["queues"].items():
            click.echo(f"  {queue:<12} {depth:>10}")
        in_progress = report["in_progress"]
        click.echo(f"  {'in progress':<12} {in_progress:>10}  (delivered, not yet acknowledged)")
    workers = report["workers"]
    click.echo("workers (answered a ping)")
    for name in workers or ["none" if workers == [] else "unavailable (see problems)"]:
        click.echo(f"  {name}")
    crawls = report["crawls"]
    click.echo("crawls (runs not yet ended)")
    for crawl in crawls or []:
        where = f"  on {crawl['worker']}" if crawl["worker"] else ""
        click.echo(
            f"  {crawl['campaign']:<20} {crawl['state']:<9} run {crawl['run_id']}"
            f"  {crawl['pages_fetched']} pages  since {crawl['started_at']}"
            f"  heartbeat {crawl['heartbeat_age_s']} s ago{where}"
        )
    if not crawls:
        click.echo("  none" if crawls == [] else "  unavailable (see problems)")
    known = report["servers"]["mongo"]["ok"]
    last_scan = report["last_scan_at"] or ("never" if known else "unavailable (see problems)")
    click.echo(f"last scan      {last_scan}")
    overdue = report["scans_overdue"]
    click.echo(f"scans overdue  {'unavailable (see problems)' if overdue is None else overdue}")
    click.echo("compiled loops (this installation)")
    for loop, compiled in report["compiled_loops"].items():
        click.echo(f"  {loop:<30} {'compiled' if compiled else 'NOT COMPILED (numpy fallback)'}")
    click.echo("problems")
    for problem in report["problems"] or ["none"]:
        click.echo(f"  {problem}")


def _library_section(ctx: Context, report: dict[str, Any]) -> bool:
    click.echo("library")
    ok = True
    if not report["servers"]["mongo"]["ok"]:
        click.echo("  masters, pages, findings unavailable: MongoDB does not answer")
        ok = False
    else:
        try:
            # Estimated counts come from collection metadata: no scan, however big.
            for name in ("masters", "pages", "findings"):
                click.echo(f"  {name:<12} {ctx.db[name].estimated_document_count():>10}")
        except PyMongoError as err:
            click.echo(f"  unavailable: {first_line(err)}")
            ok = False
    if not report["servers"]["redis"]["ok"]:
        click.echo("  postings unavailable: Redis does not answer")
        return False
    try:
        stats = ctx.index.stats()
    except redis.RedisError as err:
        click.echo(f"  postings unavailable: {first_line(err)}")
        return False
    click.echo(
        f"  {'postings':<12} {stats.postings:>10}  "
        f"({stats.bytes_per_posting:.1f} bytes/posting, {stats.memory_bytes:,} bytes)"
    )
    return ok


@click.command()
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print only the health report (servers, queues, workers, last scan, compiled loops, "
    "problems) as JSON.",
)
def status(as_json: bool) -> None:
    """Show servers, processes, queue depths, workers, crawls, the last scan, the compiled
    loops and library figures; starts nothing.

    Exit status 1 when a server does not answer (or a library figure cannot be read).
    """
    settings = Settings.from_env()
    found = _found_servers(settings)
    if not as_json:
        _servers_section(settings, found)
        _processes_section(settings)
    ctx = _status_context(settings, found)
    try:
        report = health(ctx) if ctx else unprobed(_not_running(found))
        healthy = report["ok"]
        if as_json:
            click.echo(json.dumps(report, indent=2))
        else:
            _health_section(report)
            healthy = ctx is not None and _library_section(ctx, report) and healthy
    finally:
        if ctx is not None:
            ctx.close()
    sys.exit(0 if healthy else 1)
