"""Crawl campaigns and their runs: validation, storage, locking, scheduling, completion.

A campaign (MongoDB ``campaigns``, unique ``name``) says what to crawl: seeds (pages,
sitemaps, RSS/Atom feeds), allowed domains, allow/deny URL patterns, depth and page
limits, politeness overrides, a cron schedule (UTC). A run (``runs``) records one crawl:

    (queued ─►) starting ─► running ─► scanning ─► finished
        └───────────┴──────────┴─────────────────► failed

``trigger_run`` takes the campaign's Redis lock (``SET NX PX``: a campaign never runs
twice at once), records the run and starts ``python -m crawler.run`` in its own process
(Twisted's reactor cannot restart, and a crash stays contained): right there with
``COPYTRACK_CRAWL_DISPATCH=local``; with ``queue`` the run waits ``queued`` for a crawler
worker, whose ``tracker.crawl_run`` task starts the process and waits for it
(``crawl_queued_run``). The crawl process renews the lock and the run's heartbeat while it
works, adds its counts to the run, and on exit moves it to ``scanning``. The run is
``finished`` once every page it stored has been scanned (by Celery workers, or inline by
``wait_for_run``); ``refresh_run`` checks that, and fails runs whose crawl process
vanished: no heartbeat, or (at once) every process of the run ran on this machine and is
gone, as after a ``kill -9``; a queued run only once it has waited ``QUEUE_WAIT``. A run
after a failed one resumes it: the pages the failed run fetched (``resume_since``) are
not fetched again.

Seeds pass the same private-network rule as every crawled URL (tracker.netguard).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from bson import ObjectId
from croniter import croniter
from kombu.exceptions import OperationalError
from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.errors import DuplicateKeyError

from .celery_app import CRAWL_TASK, app
from .context import Context
from .netguard import check_url
from .pages import needs_scan, scan_mark, scan_page
from .processes import descendants, pid_space, process_running

log = logging.getLogger(__name__)

#: The crawl process; runs `crawler/run.py` with this interpreter.
CRAWL_COMMAND = [sys.executable, "-m", "crawler.run"]
_CRAWL_MARKER = " ".join(CRAWL_COMMAND[1:])  # in a crawl process's command line

LOCK_TTL = timedelta(minutes=2)
HEARTBEAT_EVERY = timedelta(seconds=15)  # lock renewal and run heartbeat by the crawl process
HEARTBEAT_STALE = timedelta(seconds=90)  # a crawl silent this long has died
# A queued run has no process to heartbeat: it holds the campaign this long (crawlers busy
# with long crawls, or none running yet), then fails, lest a lost task lock it for ever.
QUEUE_WAIT = timedelta(hours=24)
ACTIVE_STATES = ("queued", "starting", "running")
DONE_STATES = ("finished", "failed")

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
# host name, IPv4 address or bracketed IPv6 address, then an optional port
_DOMAIN = re.compile(rf"^(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-f:.]+\])(?::\d{{1,5}})?$")
_REASON = re.compile(r"[^a-z0-9_-]+")
_COUNTER_GROUPS = ("pages", "skipped", "failed")
_COMPARE_AND_PEXPIRE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""
_COMPARE_AND_DELETE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end
return 0
"""


class CampaignError(ValueError):
    """A campaign definition or file is invalid, or names no stored campaign."""


class CampaignBusy(RuntimeError):
    """The campaign is already running; ``run_id`` is that run (None if unknown)."""

    def __init__(self, name: str, run_id: str | None) -> None:
        super().__init__(f"campaign {name!r} is already running (run {run_id or 'unknown'})")
        self.run_id = run_id


# --------------------------------------------------------------------------- definition


@dataclass(frozen=True)
class Campaign:
    """What to crawl and how politely; validated by :meth:`from_dict`."""

    name: str
    seeds: tuple[str, ...]
    allowed_domains: tuple[str, ...] = ()  # empty: the seeds' host[:port]s
    allow: tuple[str, ...] = ()  # regexes a followed URL must match (one of)
    deny: tuple[str, ...] = ()  # regexes no followed URL may match
    max_depth: int | None = None  # link hops from a seed; None: unlimited
    max_pages: int | None = 10_000
    schedule: str | None = None  # cron expression, UTC
    enabled: bool = True
    delay: float | None = None  # seconds between requests to one site (None: crawler default)
    concurrency: int | None = None  # parallel requests to one site (None: crawler default)
    refetch_days: float = 0.0  # a page fetched more recently is not fetched again
    notes: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Campaign:
        """Validate a campaign given as a mapping (CLI options, YAML, JSON, MongoDB)."""
        if not isinstance(data, Mapping):
            raise CampaignError(f"a campaign must be a mapping of fields, not {_kind(data)}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"_id", "created_at", "updated_at",
                                              "last_scheduled_at"})  # fmt: skip
        if unknown:
            raise CampaignError(
                f"unknown field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(known))}"
            )
        name = data.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise CampaignError(
                f"name: {name!r} is not a valid name (1-64 letters, digits, '_', '.', '-', "
                "starting with a letter or digit)"
            )
        values: dict[str, Any] = {"name": name}
        values["seeds"] = tuple(_seed(s) for s in _strings(data, "seeds"))
        if not values["seeds"]:
            raise CampaignError("seeds: give at least one seed URL (page, sitemap or feed)")
        values["allowed_domains"] = tuple(_domain(d) for d in _strings(data, "allowed_domains"))
        for key in ("allow", "deny"):
            values[key] = tuple(_regex(key, p) for p in _strings(data, key))
        values["max_depth"] = _number(data, "max_depth", int, 0, cls.max_depth)
        values["max_pages"] = _number(data, "max_pages", int, 1, cls.max_pages)
        values["delay"] = _number(data, "delay", float, 0, None)
        values["concurrency"] = _number(data, "concurrency", int, 1, None)
        values["refetch_days"] = _number(data, "refetch_days", float, 0, cls.refetch_days)
        schedule = data.get("schedule")
        if schedule is not None:
            if not isinstance(schedule, str) or not croniter.is_valid(schedule):
                raise CampaignError(
                    f"schedule: {schedule!r} is not a cron expression "
                    "(five fields, e.g. '0 3 * * *' for 03:00 UTC daily)"
                )
            values["schedule"] = schedule.strip()
        enabled = data.get("enabled", True)
        if not isinstance(enabled, bool):
            raise CampaignError(f"enabled: expected true or false, got {enabled!r}")
        values["enabled"] = enabled
        notes = data.get("notes") or ""
        if not isinstance(notes, str):
            raise CampaignError("notes: expected text")
        values["notes"] = notes
        return cls(**values)

    def domains(self) -> tuple[str, ...]:
        """The allowed domains, or the seeds' ``host[:port]`` when none are given."""
        if self.allowed_domains:
            return self.allowed_domains
        return tuple(dict.fromkeys(urlsplit(seed).netloc.lower() for seed in self.seeds))

    def to_doc(self) -> dict[str, Any]:
        """The fields as stored in MongoDB (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _kind(value: object) -> str:
    return type(value).__name__


def _strings(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise CampaignError(f"{key}: expected a list of strings, got {value!r}")
    return [v.strip() for v in value if v.strip()]


def _seed(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CampaignError(f"seeds: {url!r} is not an http(s) URL with a host")
    return url


def _domain(domain: str) -> str:
    domain = domain.lower().rstrip(".")
    if not _DOMAIN.match(domain):
        raise CampaignError(
            f"allowed_domains: {domain!r} is not a host name or host:port (no scheme, no path)"
        )
    return domain


def _regex(key: str, pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as err:
        raise CampaignError(
            f"{key}: {pattern!r} is not a valid regular expression: {err}"
        ) from None
    return pattern


def _number(data: Mapping[str, Any], key: str, kind: type, minimum: float, default: Any) -> Any:
    value = data.get(key, default)
    if value is None:
        return None
    # bool is an int subclass: `max_pages: yes` in YAML must not mean 1.
    ok = not isinstance(value, bool) and isinstance(value, int | float if kind is float else int)
    if not ok or value < minimum:
        what = "a whole number" if kind is int else "a number"
        raise CampaignError(f"{key}: expected {what} ≥ {minimum:g}, got {value!r}")
    return kind(value)


def check_seeds(campaign: Campaign, allow_private: bool) -> None:
    """Refuse seeds on private or loopback addresses unless private networks are allowed."""
    for seed in campaign.seeds:
        try:
            check_url(seed, allow_private)
        except OSError as err:
            raise CampaignError(f"seeds: cannot resolve {seed}: {err}") from None
        except ValueError as err:
            raise CampaignError(f"seeds: {seed} refused: {err}") from None


def load_campaign_file(path: Path) -> list[Campaign]:
    """Campaigns from a YAML or JSON file: one mapping, a list, or ``{campaigns: [...]}``.

    Raises CampaignError naming the file, and the campaign and field at fault.
    """
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CampaignError(f"{path}: cannot read: {err}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else yaml.safe_load(raw)
    except json.JSONDecodeError as err:
        raise CampaignError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}): "
                            f"{err.msg}") from None  # fmt: skip
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise CampaignError(f"{path}: not valid YAML{where}: {problem}") from None
    if isinstance(data, Mapping) and "campaigns" in data:
        data = data["campaigns"]
    items = [data] if isinstance(data, Mapping) else data
    if not isinstance(items, list) or not items:
        raise CampaignError(
            f"{path}: expected a campaign, a list of campaigns or {{campaigns: [...]}}, "
            f"got {_kind(data)}"
        )
    campaigns, names = [], set()
    for n, item in enumerate(items, start=1):
        label = item.get("name") if isinstance(item, Mapping) else None
        try:
            campaign = Campaign.from_dict(item)
        except CampaignError as err:
            raise CampaignError(f"{path}: campaign #{n} ({label or 'no name'}): {err}") from None
        if campaign.name in names:
            raise CampaignError(f"{path}: campaign #{n}: name {campaign.name!r} appears twice")
        names.add(campaign.name)
        campaigns.append(campaign)
    return campaigns


# --------------------------------------------------------------------------- storage


def save_campaign(ctx: Context, campaign: Campaign, replace: bool = False) -> str:
    """Store a campaign after checking its seeds; returns "added", "updated" or "unchanged".

    Without ``replace`` an existing name is an error.
    """
    check_seeds(campaign, ctx.settings.allow_private_networks)
    now = datetime.now(UTC)
    doc = campaign.to_doc()
    existing = ctx.db.campaigns.find_one({"name": campaign.name})
    if existing is None:
        try:
            ctx.db.campaigns.insert_one({**doc, "created_at": now, "updated_at": now})
        except DuplicateKeyError:
            existing = ctx.db.campaigns.find_one({"name": campaign.name})
        else:
            return "added"
    if not replace:
        raise CampaignError(f"campaign {campaign.name!r} exists; `campaign import` replaces it")
    if Campaign.from_dict(existing) == campaign:
        return "unchanged"
    ctx.db.campaigns.update_one({"name": campaign.name}, {"$set": {**doc, "updated_at": now}})
    return "updated"


def get_campaign(ctx: Context, name: str) -> Campaign:
    doc = ctx.db.campaigns.find_one({"name": name})
    if doc is None:
        raise CampaignError(f"no campaign named {name!r} (`copytrack campaign list` shows them)")
    return Campaign.from_dict(doc)


def list_campaigns(ctx: Context) -> list[Campaign]:
    return [Campaign.from_dict(doc) for doc in ctx.db.campaigns.find().sort("name", ASCENDING)]


def remove_campaign(ctx: Context, name: str) -> None:
    """Delete a campaign (its runs and findings stay as history); refused while it runs."""
    get_campaign(ctx, name)
    holder = ctx.redis.get(ctx.keys.campaign_lock(name))
    if holder is not None:
        raise CampaignBusy(name, holder.decode())
    ctx.db.campaigns.delete_one({"name": name})


# --------------------------------------------------------------------------- runs


def _take_lock(ctx: Context, name: str, run_id: ObjectId, ttl: timedelta) -> bool:
    px = int(ttl.total_seconds() * 1000)
    return bool(ctx.redis.set(ctx.keys.campaign_lock(name), str(run_id), nx=True, px=px))


def start_run(ctx: Context, name: str, trigger: str = "manual", queued: bool = False) -> ObjectId:
    """Take the campaign's lock and record a run in state ``starting`` (``queued`` when a
    crawler worker is to crawl it); returns its id.

    Raises CampaignBusy if the campaign is running. Runs left active by a crawl that died
    (its lock expired, or its processes are gone) are marked failed here. After a failed
    run, the new one resumes it (``resumes``, ``resume_since``).
    """
    get_campaign(ctx, name)
    run_id = ObjectId()
    # Outlasts QUEUE_WAIT, after which refresh_run fails a run still queued.
    ttl = QUEUE_WAIT + LOCK_TTL if queued else LOCK_TTL
    if not _take_lock(ctx, name, run_id, ttl):
        holder = ctx.redis.get(ctx.keys.campaign_lock(name))
        # A crawl killed outright holds its lock until it expires; refresh_run fails its
        # run, and releases the lock, as soon as its processes are known to be gone.
        if holder is not None and ObjectId.is_valid(holder.decode()):
            with contextlib.suppress(CampaignError):  # its run is being recorded
                refresh_run(ctx, ObjectId(holder.decode()))
        if not _take_lock(ctx, name, run_id, ttl):
            holder = ctx.redis.get(ctx.keys.campaign_lock(name))
            raise CampaignBusy(name, holder.decode() if holder else None)
    now = datetime.now(UTC)
    ctx.db.runs.update_many(
        {"campaign": name, "state": {"$in": list(ACTIVE_STATES)}},
        {"$set": {"state": "failed", "finished_at": now,
                  "error": "abandoned: its crawl stopped without finishing"}},
    )  # fmt: skip
    previous = ctx.db.runs.find_one({"campaign": name}, sort=[("started_at", DESCENDING)])
    resume: dict[str, Any] = {}
    if previous is not None and previous["state"] == "failed":
        # What the failed run fetched, and the runs it resumed in turn, is not fetched again.
        since = previous.get("resume_since") or previous["started_at"]
        resume = {"resumes": previous["_id"], "resume_since": since}
    ctx.db.runs.insert_one(
        {
            "_id": run_id,
            "campaign": name,
            "trigger": trigger,
            "state": "queued" if queued else "starting",
            "started_at": now,
            "heartbeat_at": now,
            "active_crawlers": 0,
            "crawl_processes": [],
            "pages": {"fetched": 0, "changed": 0, "unchanged": 0},
            "skipped": {},
            "failed": {},
            "scans_enqueued": 0,
            **resume,
        }
    )
    return run_id


def _crawl_process(pid: int) -> dict[str, Any]:
    """How a run records one of its crawl processes."""
    return {"where": pid_space(), "pid": pid}


def _crawl_died(run: Mapping[str, Any]) -> bool:
    """True when every crawl process of the run ran here and none runs any more.

    A process counts as running only with the run's id on its command line: a pid reused
    by another process (after a reboot, say) does not keep a dead run alive.
    """
    processes = run.get("crawl_processes") or []
    here, marker = pid_space(), str(run["_id"])
    return bool(processes) and all(
        p["where"] == here and not process_running(p["pid"], marker) for p in processes
    )


def crawl_log_path(ctx: Context, run_id: ObjectId | str) -> Path:
    return ctx.settings.data_dir / "logs" / f"crawl-{run_id}.log"


def launch_crawl(ctx: Context, name: str, run_id: ObjectId) -> subprocess.Popen[bytes]:
    """Start the crawl process of a run, detached, logging to DATA/logs/crawl-RUN.log."""
    log_path = crawl_log_path(ctx, run_id)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    # The child talks to exactly the servers and database of this context.
    env = dict(
        os.environ,
        COPYTRACK_MONGO_URL=ctx.endpoints.mongo_url,
        COPYTRACK_REDIS_URL=ctx.endpoints.redis_url,
        COPYTRACK_MONGO_DB=ctx.settings.mongo_db,
        COPYTRACK_DATA_DIR=str(ctx.settings.data_dir),
        COPYTRACK_ALLOW_PRIVATE_NETWORKS="1" if ctx.settings.allow_private_networks else "0",
    )
    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            [*CRAWL_COMMAND, "--campaign", name, "--run-id", str(run_id)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own session: the crawl outlives `campaign run` without --wait and the
            # scheduler, and a Ctrl-C in their terminal does not cut it short.
            start_new_session=True,
        )
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"pid": proc.pid, "log": str(log_path)},
         # Recorded here too, not only by join_run: the process may die before it joins.
         "$addToSet": {"crawl_processes": _crawl_process(proc.pid)}},
    )  # fmt: skip
    return proc


def trigger_run(ctx: Context, name: str, trigger: str = "manual") -> ObjectId:
    """Start a run of the campaign; returns the run id.

    ``COPYTRACK_CRAWL_DISPATCH=local``: its crawl process starts here. ``queue``: the run
    is recorded ``queued`` and a crawler worker crawls it (`crawl_queued_run`). Raises
    CampaignBusy (with the running run's id) if the campaign is already running, OSError
    if the crawl can neither start nor be queued (the run is then failed).
    """
    queued = ctx.settings.crawl_dispatch == "queue"
    run_id = start_run(ctx, name, trigger, queued=queued)
    try:
        if queued:
            _queue_crawl(name, run_id)
        else:
            launch_crawl(ctx, name, run_id)
    except OSError as err:
        _abort(ctx, name, run_id, f"cannot start the crawl: {err}")
        raise
    return run_id


def _queue_crawl(name: str, run_id: ObjectId) -> None:
    # By name: tracker.tasks imports this module. Its route sends it to the crawl queue.
    try:
        app.send_task(CRAWL_TASK, args=[name, str(run_id)])
    except OperationalError as err:  # kombu's form of a broker connection error
        raise ConnectionError(f"cannot queue the crawl task: {err}") from err


def crawl_queued_run(ctx: Context, name: str, run_id: ObjectId, worker: str = "") -> dict[str, Any]:
    """Crawl a queued run: start its crawl process here and wait for it to end.

    The body of the ``tracker.crawl_run`` task; ``worker`` (the Celery worker's name) is
    recorded on the run. Only the delivery that moves the run from ``queued`` to
    ``starting`` crawls: a task delivered again (its worker died, or the crawl outlasted
    the visibility timeout) finds the run started, finished or failed and returns; a run
    that crashed is resumed by the campaign's next run, as in ``local`` dispatch. A crawl
    process that cannot start, or ends without moving the run on, fails the run and
    frees the campaign. Returns ``run_id``, ``crawled`` and the run's ``state``.
    """
    now = datetime.now(UTC)
    claimed = ctx.db.runs.find_one_and_update(
        {"_id": run_id, "state": "queued", "started_at": {"$gt": now - QUEUE_WAIT}},
        # The heartbeat counts from now: the time spent in the queue was no silence.
        {"$set": {"state": "starting", "heartbeat_at": now, "worker": worker}},
    )
    if claimed is not None:
        try:
            proc = launch_crawl(ctx, name, run_id)
        except OSError as err:
            _abort(ctx, name, run_id, f"cannot start the crawl process: {err}")
        else:
            code = proc.wait()
            run = ctx.db.runs.find_one({"_id": run_id}) or {}
            # Still active with no process of it left: it died before reporting to the run.
            if run.get("state") in ACTIVE_STATES and _crawl_died(run):
                how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
                error = f"the crawl process {how} without finishing the run; see {run['log']}"
                _abort(ctx, name, run_id, error)
    run = refresh_run(ctx, run_id)
    return {"run_id": str(run_id), "crawled": claimed is not None, "state": run["state"]}


def stop_crawls() -> list[int]:
    """Ask the crawl processes this process started, itself or through its children (a
    Celery worker's pool processes), to stop; returns their pids.

    For a crawler worker told to stop (a deploy, ``docker compose stop``): its crawls run
    in sessions of their own, out of the signal's reach. SIGTERM lets each one finish the
    requests under way, record its counts and fail its run as interrupted, which the
    campaign's next run resumes, well within the worker's grace period. Needs procfs
    (Linux); elsewhere they are killed with the worker.
    """
    stopped = []
    for pid in descendants(os.getpid()):
        if process_running(pid, _CRAWL_MARKER):
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
    return stopped


def _abort(ctx: Context, name: str, run_id: ObjectId, error: str) -> None:
    """Fail the run and free its campaign (and Redis of its frontier)."""
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"state": "failed", "finished_at": datetime.now(UTC), "error": error}},
    )
    release_lock(ctx, name, run_id)
    drop_frontier(ctx, run_id)


def drop_frontier(ctx: Context, run_id: ObjectId) -> None:
    """Delete an ended run's shared frontier (requests left, seen filter): nothing reads it
    again, as the next run resumes from the pages stored, under a frontier of its own."""
    keys = list(ctx.redis.scan_iter(match=f"{ctx.keys.frontier(run_id)}:*", count=1000))
    if keys:
        ctx.redis.delete(*keys)


def release_lock(ctx: Context, name: str, run_id: ObjectId) -> None:
    """Drop the campaign's lock if this run still holds it."""
    ctx.redis.eval(_COMPARE_AND_DELETE, 1, ctx.keys.campaign_lock(name), str(run_id))


def join_run(ctx: Context, run_id: ObjectId) -> dict[str, Any]:
    """Register this crawl process with a starting or running run; returns the run."""
    run = ctx.db.runs.find_one_and_update(
        {"_id": run_id, "state": {"$in": list(ACTIVE_STATES)}},
        {"$inc": {"active_crawlers": 1},
         "$set": {"state": "running", "heartbeat_at": datetime.now(UTC)},
         "$addToSet": {"crawl_processes": _crawl_process(os.getpid())}},
        return_document=ReturnDocument.AFTER,
    )  # fmt: skip
    if run is None:
        raise CampaignError(f"run {run_id} does not exist or is no longer running")
    return run


def heartbeat(ctx: Context, name: str, run_id: ObjectId) -> bool:
    """Renew the campaign lock and the run's heartbeat; False if the run lost its lock."""
    ttl = int(LOCK_TTL.total_seconds() * 1000)
    held = bool(
        ctx.redis.eval(_COMPARE_AND_PEXPIRE, 1, ctx.keys.campaign_lock(name), str(run_id), ttl)
    )
    ctx.db.runs.update_one({"_id": run_id}, {"$set": {"heartbeat_at": datetime.now(UTC)}})
    return held


def reason_key(reason: str) -> str:
    """A skip or failure reason as a MongoDB field name (no dots, no $)."""
    return _REASON.sub("_", reason.lower()).strip("_") or "other"


def record_progress(
    ctx: Context, run_id: ObjectId, counts: Mapping[str, int], crawler: str
) -> None:
    """Add a crawl process's counts to its run.

    Keys are ``pages.fetched|changed|unchanged``, ``skipped.REASON``, ``failed.REASON`` or
    ``scans_enqueued``; ``crawler`` (host-pid) gets the pages it fetched, so a distributed
    run shows who did what.
    """
    inc: dict[str, int] = {}
    for key, n in counts.items():
        group, _, reason = key.partition(".")
        if group in _COUNTER_GROUPS and reason:
            inc[f"{group}.{reason_key(reason)}"] = inc.get(f"{group}.{reason_key(reason)}", 0) + n
        elif key == "scans_enqueued":
            inc[key] = n
        else:
            raise ValueError(f"unknown run counter {key!r}")
    fetched = counts.get("pages.fetched", 0)
    if fetched:
        inc[f"crawlers.{reason_key(crawler)}"] = fetched
    if inc:
        ctx.db.runs.update_one({"_id": run_id}, {"$inc": inc})


def finish_crawl(ctx: Context, run_id: ObjectId, error: str | None = None) -> bool:
    """Unregister this crawl process; the last one moves the run on and drops the lock.

    Returns True if this process was the run's last crawler.
    """
    update: dict[str, Any] = {
        "$inc": {"active_crawlers": -1},
        "$pull": {"crawl_processes": _crawl_process(os.getpid())},
    }
    if error:
        update["$set"] = {"error": error}
    run = ctx.db.runs.find_one_and_update(
        {"_id": run_id}, update, return_document=ReturnDocument.AFTER
    )
    if run is None or run["active_crawlers"] > 0 or run["state"] not in ACTIVE_STATES:
        return False
    now = datetime.now(UTC)
    state = "failed" if run.get("error") else "scanning"
    ctx.db.runs.update_one(
        {"_id": run_id},
        {"$set": {"state": state, "crawl_finished_at": now,
                  **({"finished_at": now} if state == "failed" else {})}},
    )  # fmt: skip
    release_lock(ctx, run["campaign"], run_id)
    refresh_run(ctx, run_id)
    return True


def pending_scans(ctx: Context, run_id: ObjectId) -> list[ObjectId]:
    """Pages stored by the run whose current text has not been scanned yet."""
    pages = ctx.db.pages.find({"run_id": run_id}, {"content_sha256": 1, "scanned_as": 1})
    mark = scan_mark(ctx)
    return [p["_id"] for p in pages if needs_scan(p, mark)]


def claim_unscanned(ctx: Context, url: str, run_id: ObjectId) -> ObjectId | None:
    """Make a stored page whose text was never scanned the run's; returns its id to scan.

    For pages a crawl serves from the store instead of fetching them: the run that stored
    one may have died before its scan was queued or done. Claimed, the page is scanned
    and counted with this run (``pending_scans``). None when the page is scanned already.
    """
    page = ctx.db.pages.find_one({"url": url}, {"content_sha256": 1, "scanned_as": 1})
    if page is None or not needs_scan(page, scan_mark(ctx)):
        return None
    ctx.db.pages.update_one({"_id": page["_id"]}, {"$set": {"run_id": run_id}})
    return page["_id"]


def refresh_run(ctx: Context, run_id: ObjectId) -> dict[str, Any]:
    """Move a run on when it is due: ``scanning`` → ``finished`` once its pages are scanned
    (counting its findings), an active run whose crawl died → ``failed``."""
    run = ctx.db.runs.find_one({"_id": run_id})
    if run is None:
        raise CampaignError(f"no run {run_id}")
    now = datetime.now(UTC)
    if error := _stopped(run, now):
        _abort(ctx, run["campaign"], run_id, error)
    elif run["state"] == "scanning" and not pending_scans(ctx, run_id):
        touched = ctx.db.findings.count_documents({"run_id": run_id})
        new = ctx.db.findings.count_documents(
            {"run_id": run_id, "first_seen": {"$gte": run["started_at"]}}
        )
        ctx.db.runs.update_one(
            {"_id": run_id, "state": "scanning"},
            {"$set": {"state": "finished", "finished_at": now,
                      "findings": {"new": new, "updated": touched - new}}},
        )  # fmt: skip
    else:
        return run
    return ctx.db.runs.find_one({"_id": run_id}) or run


def _stopped(run: Mapping[str, Any], now: datetime) -> str | None:
    """Why an active run will never finish (its error), or None if it still may."""
    if run["state"] == "queued":
        # No crawl process yet: neither silence nor dead processes say anything.
        if now - run["started_at"] <= QUEUE_WAIT:
            return None
        hours = QUEUE_WAIT.total_seconds() / 3600
        return (f"no crawler worker took it from the crawl queue within {hours:g} h "
                "(is `copytrack worker --queues crawl` running?)")  # fmt: skip
    silent = now - run["heartbeat_at"] > HEARTBEAT_STALE
    if run["state"] in ACTIVE_STATES and (silent or _crawl_died(run)):
        return f"interrupted: the crawl process stopped without finishing; see {run.get('log')}"
    return None


def refresh_runs(ctx: Context) -> None:
    """Refresh every run that is not done yet (the scheduler's housekeeping)."""
    for run in ctx.db.runs.find({"state": {"$nin": list(DONE_STATES)}}, {"_id": 1}):
        refresh_run(ctx, run["_id"])


def wait_for_run(
    ctx: Context,
    run_id: ObjectId,
    scan: bool = True,
    poll: float = 1.0,
    timeout: float | None = None,
    progress: Callable[[Mapping[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Block until the run is finished or failed; returns the run.

    With ``scan``, pages the run stored are scanned here as they arrive, so no worker is
    needed; where workers run too, whoever comes second finds the page already scanned.
    ``progress`` gets the run at every poll (a progress bar's hook). Raises TimeoutError
    after ``timeout`` seconds.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if scan:
            for page_id in pending_scans(ctx, run_id):
                try:
                    scan_page(ctx, page_id)
                except LookupError:
                    continue  # deleted meanwhile: nothing to scan
        run = refresh_run(ctx, run_id)
        if progress is not None:
            progress(run)
        if run["state"] in DONE_STATES:
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} still {run['state']} after {timeout:g} s")
        time.sleep(poll)


def run_history(ctx: Context, name: str, limit: int = 10) -> list[dict[str, Any]]:
    """The campaign's latest runs, newest first."""
    runs = ctx.db.runs.find({"campaign": name}).sort("started_at", DESCENDING).limit(limit)
    return list(runs)


def get_run(ctx: Context, run_id: ObjectId | str) -> dict[str, Any]:
    try:
        oid = ObjectId(run_id)
    except Exception:  # bson raises InvalidId or TypeError
        raise CampaignError(f"{run_id!r} is not a run id") from None
    run = ctx.db.runs.find_one({"_id": oid})
    if run is None:
        raise CampaignError(f"no run {run_id}")
    return run


# --------------------------------------------------------------------------- scheduling


def due_at(schedule: str, now: datetime) -> datetime:
    """The latest time at or before ``now`` when the cron schedule fires (UTC)."""
    # croniter's get_prev is strictly before its start: start a second later.
    return croniter(schedule, now + timedelta(seconds=1)).get_prev(datetime)


def run_due_campaigns(ctx: Context, now: datetime | None = None) -> list[ObjectId]:
    """Start every enabled campaign whose schedule fired since it last did; one tick.

    A fire time is claimed atomically on the campaign document, so schedulers running
    side by side start it once; missed fire times (scheduler down) yield one catch-up
    run. A campaign still running from its last fire is skipped. Returns the started runs.
    """
    now = now or datetime.now(UTC)
    started = []
    for doc in ctx.db.campaigns.find({"enabled": True, "schedule": {"$ne": None}}):
        fire = due_at(doc["schedule"], now)
        last = doc.get("last_scheduled_at")
        if fire <= (last or doc["created_at"]):
            continue
        claimed = ctx.db.campaigns.find_one_and_update(
            {"_id": doc["_id"], "last_scheduled_at": last}, {"$set": {"last_scheduled_at": fire}}
        )
        if claimed is None:
            continue  # another scheduler took this fire time
        try:
            started.append(trigger_run(ctx, doc["name"], trigger="schedule"))
        except CampaignBusy as busy:
            log.warning("scheduled run of %s skipped: %s", doc["name"], busy)
    return started
