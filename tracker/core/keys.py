"""Every Redis key copytrack writes, under one prefix per installation.

Installations sharing one Redis set different COPYTRACK_REDIS_PREFIX values and keep
apart their index, Celery queues and results, sessions, login throttles, campaign locks,
crawl frontiers and caches. Nothing else in copytrack spells a key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RedisKeys:
    """The keys of the installation named ``prefix``."""

    prefix: str

    @property
    def index(self) -> str:
        """Prefix of the inverted index's keys (tracker.index)."""
        return f"{self.prefix}:ix"

    @property
    def celery(self) -> str:
        """kombu's ``global_keyprefix``: put before every key of the queues and results."""
        return f"{self.prefix}:celery:"

    def queue(self, name: str) -> str:
        """The list of a Celery queue's waiting tasks."""
        return self.celery + name

    @property
    def unacked(self) -> str:
        """The hash of tasks delivered to workers and not yet acknowledged."""
        return self.celery + "unacked"

    @property
    def library_edit(self) -> str:
        """A random value set anew whenever a work's text or title changes
        (tracker.masters.master_cache)."""
        return f"{self.prefix}:library-edit"

    @property
    def library_size(self) -> str:
        """The count of the library's works, shared for a while (tracker.masters.library)."""
        return f"{self.prefix}:library-size"

    @property
    def library_size_changes(self) -> str:
        """How many times works began or ended being added or removed, and a count was
        shared: a count is not kept across a change it may have missed (tracker.masters.library)."""
        return f"{self.prefix}:library-size-changes"

    @property
    def library_counting(self) -> str:
        """Held by the process counting the library's works (tracker.masters.library)."""
        return f"{self.prefix}:library-counting"

    @property
    def scan_sweep(self) -> str:
        """Held by the worker looking for lost scans, for one interval (tracker.tasks)."""
        return f"{self.prefix}:scan-sweep"

    @property
    def timestamp_sweep(self) -> str:
        """Held while captures are being time-stamped, or a task to do it is queued
        (tracker.evidence.timestamps)."""
        return f"{self.prefix}:timestamp-sweep"

    @property
    def dashboard(self) -> str:
        return f"{self.prefix}:dashboard"

    def session(self, sid_digest: str) -> str:
        return f"{self.prefix}:session:{sid_digest}"

    @property
    def login_failures(self) -> str:
        """Prefix of the login throttle's counters."""
        return f"{self.prefix}:login-fail"

    def campaign_lock(self, campaign: str) -> str:
        return f"{self.prefix}:campaign:{campaign}:lock"

    def frontier(self, run_id: object) -> str:
        """Prefix of a run's shared crawl frontier (COPYTRACK_CRAWL_FRONTIER=redis)."""
        return f"{self.prefix}:frontier:{run_id}"

    def durability_mark(self, host: str, pid: int) -> str:
        return f"{self.prefix}:durable:{host}:{pid}"

    def worker_heartbeat(self, queue: str) -> str:
        """Set, with a short expiry, while a worker consuming ``queue`` is alive
        (tracker.monitoring.heartbeats)."""
        return f"{self.prefix}:workers:{queue}"

    def health_probe(self, host: str, pid: int) -> str:
        return f"{self.prefix}:health:{host}:{pid}"
