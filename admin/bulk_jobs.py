"""Bulk changes of very many findings (a filter matching 100,000), run in a thread off the
request a batch at a time: 100,000 changes take minutes on the embedded MongoDB, longer
than a request should be held. The page a reviewer is sent to polls the job's progress."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bson import ObjectId

from tracker.context import Context
from tracker.findings import bulk_set_status

from .web import Progress

log = logging.getLogger(__name__)

#: Changes made within the request up to this many findings; more run as a job.
IN_REQUEST = 2000
#: Findings a job changes at a time (its progress moves by this much).
BATCH = 500
#: A finished job is shown for this long, then forgotten.
KEPT_S = 60 * 60


@dataclass
class BulkJob(Progress):
    """One change of many findings: how far it is."""

    id: str
    by: str
    status: str
    total: int
    back: str
    done: int = 0
    changed: int = 0
    refused: int = 0
    finished_at: float | None = None
    failed: str | None = None


class BulkJobs:
    """The bulk jobs of an admin."""

    def __init__(self, ctx_of: Callable[[], Context]) -> None:
        self._ctx_of = ctx_of
        self._jobs: dict[str, BulkJob] = {}
        self._lock = threading.Lock()
        self.in_request = IN_REQUEST

    def start(
        self,
        ids: list[ObjectId],
        status: str,
        by: str,
        note: str | None,
        reason: str | None,
        back: str,
    ) -> BulkJob:
        job = BulkJob(secrets.token_urlsafe(12), by, status, len(ids), back)
        with self._lock:
            cutoff = time.time() - KEPT_S
            for key in [k for k, j in self._jobs.items() if (j.finished_at or 1e18) < cutoff]:
                del self._jobs[key]
            self._jobs[job.id] = job
        threading.Thread(
            target=self._run, args=(job, ids, note, reason), daemon=True, name="bulk-change"
        ).start()
        return job

    def get(self, job_id: str) -> BulkJob | None:
        return self._jobs.get(job_id)

    def _run(self, job: BulkJob, ids: list[ObjectId], note: str | None, reason: str | None) -> None:
        try:
            for start in range(0, len(ids), BATCH):
                batch = ids[start : start + BATCH]
                result = bulk_set_status(self._ctx_of(), batch, job.status, job.by, note, reason)
                job.changed += result.changed
                job.refused += result.refused
                job.done += len(batch)
        except Exception as err:  # the page says it stopped and how far it got
            log.exception("the change of %s findings to %s failed", job.total, job.status)
            job.failed = f"{type(err).__name__}: {err}"
        finally:
            job.finished_at = time.time()
