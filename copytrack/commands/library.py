"""`copytrack library add|list|rm` and `copytrack reindex`."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import click
from tqdm import tqdm

from tracker.context import open_context
from tracker.core.batches import worked_ahead
from tracker.index.snapshot import compact_when_due
from tracker.masters.durability import wait_documents_durable
from tracker.masters.generation import open_ready, rebuild
from tracker.masters.generation import require as require_index
from tracker.masters.library import (
    AddResult,
    PreparedWorks,
    add_batches,
    library_size,
    list_masters,
    prepare_works,
)
from tracker.masters.library import reindex as rebuild_index
from tracker.masters.loaders import Loaded, LoadError, count_works, load_works
from tracker.scanning.library_edits import delete_works


@click.group()
def library() -> None:
    """Manage the master library: the works copytrack protects."""


#: Works are registered in batches (a few round trips to each server per batch) of at most
#: --batch works or BATCH_CHARS_PER_WORK characters per work; each batch's results are
#: printed once it is on disk. Large by default: in a large library most index blocks get
#: a posting or two per batch, and each block touched is rewritten once per batch (4,000
#: works instead of 1,000: 1.7x the works/s at 100,000 works; 8,000 instead of 4,000:
#: 1.24x; 16,000 instead of 8,000: 230 -> 164 s for 100,000 works, ~2.2 GB resident
#: instead of ~1.3: those works average 5,500 characters). The characters' cap holds a
#: batch of long works (chapters, books) to 96 million characters, 1.5x what it was.
BATCH_WORKS = 16000
BATCH_CHARS_PER_WORK = 6000


@library.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show a progress bar on stderr (default: when stderr is a terminal).",
)
@click.option(
    "--batch",
    "batch_works",
    type=click.IntRange(min=1),
    default=BATCH_WORKS,
    show_default=True,
    help="Works stored (and then printed) together: larger is faster in a large library, "
    "smaller takes less memory (about 2.2 GB at 16,000 news-sized works).",
)
@click.option(
    "--chapters",
    is_flag=True,
    help="A .docx or .epub master gives a work per chapter (its first-level headings, its "
    "spine), named FILE-001, FILE-002 …; without it, one work per file.",
)
def add(paths: tuple[Path, ...], progress: bool | None, batch_works: int, chapters: bool) -> None:
    """Register works from PATHS: .txt, .md, .html, .docx, .epub, .pdf files, JSONL, or
    directories (recursive).

    JSONL lines need "text"; "id", "title", "author", "lang", "kind" are kept. Re-adding the
    same text changes nothing. Each result goes to stdout as
    `STATUS<TAB>ID<TAB>TITLE`, once the work is on disk (a server killed or a full disk
    loses nothing that was printed); problems go to stderr with file and line, and the
    rest still goes in. Exit status 1 if anything failed; 2 if a server failed (one line
    says which, and what to do; what was printed is saved, the rest is not).
    """
    ctx = open_ready()
    counts: Counter[str] = Counter()
    unreadable: Counter[str] = Counter()  # counted by the thread reading the works
    show = sys.stderr.isatty() if progress is None else progress
    # Counted first (0.5 s for 100,000 works of JSONL): the bar's total, and the index's
    # room made ahead for them.
    expected = count_works(paths)
    bar = tqdm(
        desc="adding works", unit="work", total=expected or None, disable=not show, file=sys.stderr
    )

    def batches() -> Iterator[list[Loaded]]:
        batch: list[Loaded] = []
        chars = 0
        for item in load_works(paths, chapters):
            bar.update(1)
            if isinstance(item, LoadError):
                unreadable["failed"] += 1
                tqdm.write(f"error: {item}", file=sys.stderr)
                continue
            batch.append(item)
            chars += len(item.work.text)
            if len(batch) >= batch_works or chars >= batch_works * BATCH_CHARS_PER_WORK:
                yield batch
                batch, chars = [], 0
        if batch:
            yield batch

    def prepared(batch: list[Loaded]) -> PreparedWorks:
        return prepare_works(ctx, [item.work for item in batch])

    def lines_of(batch: list[Loaded], added: list[list[AddResult] | ValueError]) -> list[str]:
        lines = []
        for item, results in zip(batch, added, strict=True):
            if isinstance(results, ValueError):
                counts["failed"] += 1
                tqdm.write(f"error: {item.where}: {results}", file=sys.stderr)
                continue
            for result in results:
                counts[result.status] += 1
                detail = f"\t{result.detail}" if result.detail else ""
                lines.append(
                    f"{result.status}\t{result.external_id}\t{item.work.title or ''}{detail}"
                )
        return lines

    def report(lines: list[str]) -> None:
        if lines:
            # add_batches stored the batch once its postings were on the index's disk: the
            # documents' journal is what is left to wait for.
            wait_documents_durable(ctx)
            require_index(ctx)  # the index was not lost (wiped, restarted empty) meanwhile
            click.echo("\n".join(lines))

    # Five batches at once, each stage on its own: one is read and fingerprinted, the next
    # has its known works settled while the one before has its postings written and the
    # one before that its documents inserted (`add_batches`), and the one before that
    # waits for the disk and is printed.
    with bar, ThreadPoolExecutor(1) as ahead, ThreadPoolExecutor(1) as reporter:
        reports: list[Future[None]] = []
        ready = worked_ahead(batches(), prepared, ahead)
        for batch, added in add_batches(ctx, ready, expected_works=expected):
            reports.append(reporter.submit(report, lines_of(batch, added)))
            for done in [r for r in reports if r.done()]:
                done.result()  # a failed disk wait stops the command here
                reports.remove(done)
        for pending in reports:
            pending.result()
        bar.total = bar.n  # blank lines were counted as works
    counts += unreadable
    if counts["added"]:
        # Counted once here and shared: the matching processes that follow would each wait
        # for one of them to count (0.7 s at 100,000 works on the embedded MongoDB).
        library_size(ctx)
        # Off every request's path: the recent postings merged into the snapshot once
        # they pass a tenth of it (COPYTRACK_INDEX_SNAPSHOT).
        compact_when_due(ctx.index)
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing"
    click.echo(f"library add: {summary}", err=True)
    sys.exit(1 if counts["failed"] else 0)


@library.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_(as_json: bool) -> None:
    """List the masters, one line each: id, external id, chars, fingerprints, title, and
    NOT INDEXED for a work whose add or update was interrupted (add it again)."""
    ctx = open_ready()
    for master in list_masters(ctx):
        if as_json:
            fields = (
                "_id",
                "external_id",
                "title",
                "author",
                "lang",
                "kind",
                "work_id",
                "chars",
                "fingerprints",
                "state",
            )
            click.echo(json.dumps({k: master.get(k) for k in fields}, ensure_ascii=False))
        else:
            unindexed = "\tNOT INDEXED" if master.get("state") != "indexed" else ""
            click.echo(
                f"{master['_id']}\t{master['external_id']}\t{master.get('chars', 0)}\t"
                f"{master.get('fingerprints', 0)}\t{master.get('title') or ''}{unindexed}"
            )


@library.command()
@click.argument("work_id")
def rm(work_id: str) -> None:
    """Remove a work (by external id, integer id or work id: every chapter) from the library
    and the index.

    Its findings nobody decided on are deleted with it; those a reviewer decided on are
    kept as records, with the work's text archived. One line per work removed:
    `removed<TAB>ID<TAB>N findings deleted, M kept as records`.
    """
    removed = delete_works(open_ready(), work_id, by="cli")
    if not removed:
        click.echo(
            f"copytrack: no work {work_id!r} in the library (see `copytrack library list`)",
            err=True,
        )
        sys.exit(1)
    for result in removed:
        click.echo(
            f"removed\t{result.external_id}\t{result.findings_deleted} findings deleted, "
            f"{result.findings_kept} kept as records"
        )


@click.command()
def reindex() -> None:
    """Rebuild the Redis index from the library in MongoDB (after a Redis loss or upgrade).

    The rebuilt index is a new generation: scans are refused while it is being built, and
    `copytrack rescan` afterwards scans the stored pages again against it.
    """
    ctx = open_context(check_index=False)
    total = ctx.db.masters.estimated_document_count()
    with tqdm(
        total=total,
        desc="reindexing",
        unit="work",
        file=sys.stderr,
        disable=not sys.stderr.isatty(),
    ) as bar:
        count = rebuild(ctx, lambda c: rebuild_index(c, progress=bar.update))
    compact_when_due(ctx.index, always=True)  # every posting into the snapshot
    stats = ctx.index.stats()
    click.echo(
        f"reindexed {count} masters: {stats.postings} postings, "
        f"{stats.bytes_per_posting:.1f} bytes/posting"
    )
    if pages := ctx.db.pages.estimated_document_count():
        click.echo(f"{pages} stored pages were scanned with the old index: run `copytrack rescan`")
