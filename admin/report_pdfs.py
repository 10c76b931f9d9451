"""Long domain and work reports as PDF, built in a thread off the request: a page of findings at a
time into the data directory, then joined, so no request waits for WeasyPrint and the admin
holds one page of a report at a time. WeasyPrint runs in a child process (its fonts and
layout took the admin from 178 to 332 MB for one report): the admin keeps its memory
whatever the report's size. The admin page polls the build's progress."""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import hashlib
import io
import logging
import multiprocessing
import shutil
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from pypdf import PdfReader, PdfWriter

from tracker.context import Context
from tracker.findings import REPORT_PAGE, Report, domain_report, work_report

from .pdf import pdf
from .web import Progress, templates

log = logging.getLogger(__name__)

#: A finished PDF is given as it is for this long; a later request builds it afresh.
KEPT_S = 15 * 60


@dataclass
class Build(Progress):
    """One report's PDF: how many pages of findings are rendered, of how many."""

    path: Path
    done: int = 0
    total: int = 1
    finished_at: float | None = None
    failed: str | None = None

    @property
    def ready(self) -> bool:
        return self.finished_at is not None and self.failed is None


def _report(ctx: Context, kind: str, subject: str, scope: str, page: int) -> Report:
    """One page of the report on ``subject``."""
    if kind == "domain":
        return domain_report(ctx, subject, scope, page, REPORT_PAGE)
    report = work_report(ctx, subject, page, REPORT_PAGE)
    if report is None:
        raise LookupError(f"no work {subject!r} in the library any more")
    return report


def _die_with_parent() -> None:
    """In the child process: end when the admin ends, even killed (Linux's parent-death
    signal; elsewhere the child ends with the admin's normal exit)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


def _write_pdf(html: str, path: Path) -> None:
    """In the child process: one part of a report, as PDF."""
    path.write_bytes(pdf(html))


def _join(files: list[Path], out: Path) -> None:
    """In the child process: the parts joined, numbered over all their pages."""
    writer = PdfWriter()
    for file in files:
        writer.append(file)
    _number(writer)
    with out.open("wb") as written:
        writer.write(written)


class ReportPdfs:
    """The PDF builds of an admin, one a report (kind, subject and scope) at a time."""

    def __init__(self, ctx_of: Callable[[], Context]) -> None:
        self._ctx_of = ctx_of
        self._builds: dict[tuple[str, str, str], Build] = {}
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def _child(self) -> ProcessPoolExecutor:
        """The process WeasyPrint runs in, started on the first build (spawned: a fork
        of the admin would copy its memory and threads)."""
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    1, multiprocessing.get_context("spawn"), initializer=_die_with_parent
                )
            return self._pool

    def close(self) -> None:
        """Stop the child process (the admin is stopping)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def build(self, subject: str, scope: str, kind: str = "domain") -> Build:
        """The build of the report on ``subject`` (a domain, or a work with ``kind``
        "work"): started now unless one runs, or finished a little while ago."""
        key = (kind, subject, scope)
        with self._lock:
            build = self._builds.get(key)
            fresh = build and (
                build.finished_at is None
                or (build.failed is None and time.time() - build.finished_at < KEPT_S)
            )
            if build is not None and fresh:
                return build
            ctx = self._ctx_of()
            # One folder a report of a database (installations may share a data dir).
            named = f"{ctx.db.name}\0{subject}\0{scope}" + ("" if kind == "domain" else "\0work")
            folder = (
                ctx.settings.data_dir / "reports" / hashlib.sha256(named.encode()).hexdigest()[:16]
            )
            build = Build(path=folder / "report.pdf")
            self._builds[key] = build
        # The reader's language and time zone go with the thread (context variables).
        run = contextvars.copy_context().run
        threading.Thread(
            target=run,
            args=(self._run, build, kind, subject, scope),
            daemon=True,
            name="report-pdf",
        ).start()
        return build

    def _run(self, build: Build, kind: str, subject: str, scope: str) -> None:
        ctx = self._ctx_of()
        parts = build.path.parent / "parts"
        shutil.rmtree(parts, ignore_errors=True)
        parts.mkdir(parents=True)
        try:
            page, files = 1, []
            while True:
                report = _report(ctx, kind, subject, scope, page)
                build.total = report.pages
                # Parts unnumbered: the joined PDF is numbered over all its pages.
                html = templates.get_template("report.html").render(
                    report=report, pdf=True, continued=page > 1, unnumbered=True
                )
                files.append(parts / f"{page:06d}.pdf")
                self._child().submit(_write_pdf, html, files[-1]).result()
                build.done = page
                if page >= report.pages:
                    break
                page += 1
            partial = build.path.with_suffix(".part")
            self._child().submit(_join, files, partial).result()
            partial.replace(build.path)
        except Exception as err:  # the page says it failed, the log says why
            log.exception("the PDF of the report on %s (%s) failed", subject, scope)
            if isinstance(err, BrokenProcessPool):  # the child died: the next build starts one
                with self._lock:
                    self._pool = None
            build.failed = f"{type(err).__name__}: {err}"
        finally:
            shutil.rmtree(parts, ignore_errors=True)
            build.finished_at = time.time()


def _number(writer: PdfWriter) -> None:
    """Page numbers ("3 / 466") stamped over the joined pages, as the stylesheet numbers a
    report made at once."""
    count = len(writer.pages)
    blank = '<p style="break-after: page">&#160;</p>' * (count - 1) + "<p>&#160;</p>"
    numbers = PdfReader(io.BytesIO(pdf(f'<html><body class="report">{blank}</body></html>')))
    for page, number in zip(writer.pages, numbers.pages, strict=False):
        page.merge_page(number)
