"""`copytrack check`: which works does a text, file, URL or batch of suspects copy?"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from concurrent.futures import Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import click

from tracker.context import Context
from tracker.core.config import Settings
from tracker.core.jsonl import BadLine, not_regular, read_jsonl
from tracker.masters.generation import open_ready
from tracker.masters.loaders import HTML_SUFFIXES
from tracker.matching.index_audit import audit_sample
from tracker.matching.match_pool import MatchPool, Timed
from tracker.matching.matcher import Match, match_text

PASSAGES_SHOWN = 3
BATCH = 8  # suspects of --jsonl sent to a matching process at once
SMALL_FILE_BYTES = 256 * 1024  # --jsonl input per matching process, at least


def _snippet(text: str, start: int, end: int, width: int = 60) -> str:
    piece = " ".join(text[start:end].split())
    return piece if len(piece) <= width else piece[: width - 1] + "…"


def _read_source(source: str) -> str:
    # Imported here: both load trafilatura (~0.4 s), which `check --jsonl` never needs.
    from crawler.fetch import fetch_text
    from extractor import decode_text_file, html_to_text

    if source == "-":
        return sys.stdin.read()
    if source.startswith(("http://", "https://")):
        try:
            return fetch_text(source)
        except ValueError as err:
            raise click.BadParameter(str(err)) from None
    path = Path(source)
    if not path.is_file():
        raise click.BadParameter(f"{source}: no such file (give a file, a URL or -)")
    data = path.read_bytes()
    try:
        if path.suffix.lower() in HTML_SUFFIXES:
            return html_to_text(data)
        return decode_text_file(data)
    except ValueError as err:
        raise click.BadParameter(f"{source}: {err}") from None


def _read_url_with_ocr(source: str) -> tuple[str, list[tuple[int, int, str]]]:
    """A URL's text with what OCR read in its article's images (or in the URL itself, a
    picture), as a campaign with ``ocr`` reads it; and where OCR's readings are."""
    from crawler.digest import ocr_spans
    from crawler.fetch import fetch_page

    if not source.startswith(("http://", "https://")):
        raise click.BadParameter(f"{source}: --ocr reads the images of a URL: give one")
    try:
        page = fetch_page(source, ocr=True)
    except ValueError as err:
        raise click.BadParameter(str(err)) from None
    if page.skip_reason:
        raise click.BadParameter(f"{source}: no text, none read by OCR ({page.skip_reason})")
    spans = ocr_spans(page.text, page.images)
    if spans:
        read = sum(end - start for start, end, _ in spans)
        click.echo(f"read by OCR: {read} of {len(page.text)} characters, from "
                   f"{len(spans)} image(s): {', '.join(url for _, _, url in spans)}")  # fmt: skip
    return page.text, spans


def _ocr_note(spans: list[tuple[int, int, str]], start: int, end: int) -> str:
    """`` (read by OCR from URL)`` for a passage of the text OCR read, else nothing."""
    images = [url for first, last, url in spans if first < end and start < last]
    return f" (read by OCR from {', '.join(images)})" if images else ""


def _print_matches(
    ctx: Context, text: str, matches: list[Match], ocr: list[tuple[int, int, str]] | None = None
) -> None:
    if not matches:
        click.echo("no match: this text copies no work of the library")
        return
    masters = {
        m["_id"]: m
        for m in ctx.db.masters.find({"_id": {"$in": [m.master.id for m in matches]}}, {"text": 1})
    }
    for match in matches:
        title = f" — {match.master.title}" if match.master.title else ""
        click.echo(
            f"{match.master.external_id}{title}\n"
            f"  score {match.score:.2f} · {match.master_coverage:.0%} of the work · "
            f"{match.suspect_coverage:.0%} of this text · {match.hits} fingerprint hits · "
            f"{len(match.spans)} passages"
        )
        master_text = masters.get(match.master.id, {}).get("text", "")
        longest = sorted(match.spans, key=lambda s: s.suspect_start - s.suspect_end)
        for span in longest[:PASSAGES_SHOWN]:
            click.echo(
                f"    work [{span.master_start}:{span.master_end}] "
                f"{_snippet(master_text, span.master_start, span.master_end)}"
            )
            click.echo(
                f"    text [{span.suspect_start}:{span.suspect_end}] "
                f"{_snippet(text, span.suspect_start, span.suspect_end)}"
                f"{_ocr_note(ocr or [], span.suspect_start, span.suspect_end)}"
            )


def _check_jsonl(pool: MatchPool, path: Path, processes: int) -> int:
    """One JSON line per (suspect, master) pair found, in the file's order; returns the
    number of bad lines.

    Suspects are matched by ``processes`` processes (`tracker.matching.match_pool`), a batch of
    ``BATCH`` at a time; at most two batches per process are in flight, so a file of any
    size streams.
    """
    bad = 0
    batch: list[tuple[object, str]] = []
    pending: deque[tuple[list[object], Future[list[Timed]]]] = deque()

    def submit_batch() -> None:
        pending.append(([key for key, _ in batch], pool.submit([t for _, t in batch])))
        batch.clear()
        if len(pending) > 2 * processes:
            _print_pairs(*pending.popleft())

    for item in read_jsonl(path):
        if isinstance(item, BadLine):
            bad += 1
            click.echo(f"error: {item}", err=True)
            continue
        line_no, obj = item
        text = obj.get("text")
        if not isinstance(text, str):
            bad += 1
            click.echo(f'error: {path}:{line_no}: no "text" string', err=True)
            continue
        batch.append((obj.get("id", line_no), text))
        if len(batch) == BATCH:
            submit_batch()
    if batch:
        submit_batch()
    while pending:
        _print_pairs(*pending.popleft())
    return bad


def _print_pairs(suspect_ids: list[object], matched: Future[list[Timed]]) -> None:
    for suspect_id, (matches, latency_ms) in zip(suspect_ids, matched.result(), strict=True):
        for match in matches:
            click.echo(
                json.dumps(
                    {
                        "suspect_id": suspect_id,
                        "master_id": match.master.external_id,
                        "score": match.score,
                        "master_coverage": match.master_coverage,
                        "suspect_coverage": match.suspect_coverage,
                        "latency_ms": latency_ms,
                    },
                    ensure_ascii=False,
                )
            )


@click.command()
@click.argument("source", required=False)
@click.option(
    "--jsonl",
    "jsonl_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='Check every line {"id", "text"} of a JSONL file; one JSON line per match.',
)
@click.option(
    "--processes",
    type=click.IntRange(min=1),
    # One more than the CPUs: each waits on Redis and MongoDB part of the time (100,000
    # works on 2 cores: 7.1 -> 6.5 s; the same at 10,000).
    default=(os.cpu_count() or 1) + 1,
    show_default="the CPU count + 1",
    help=(
        "Processes that match the suspects of --jsonl, each with its own connections and "
        "caches of works (COPYTRACK_MASTER_CACHE_MB, and up to 512 MB of their letters)."
    ),
)
@click.option(
    "--ocr",
    is_flag=True,
    help="With a URL: read its article's images (or the URL, a picture) with OCR too, as "
    "a campaign with ocr does; the output says which text OCR read.",
)
def check(source: str | None, jsonl_path: Path | None, processes: int, ocr: bool) -> None:
    """Show which works SOURCE copies: a file (.txt, .md, .html), a URL, or - for stdin."""
    if (source is None) == (jsonl_path is None):
        raise click.UsageError("give either SOURCE (file, URL or -) or --jsonl FILE")
    if ocr and jsonl_path is not None:
        raise click.UsageError("--ocr reads the images of a URL: give one, not --jsonl")
    if jsonl_path is not None:
        if problem := not_regular(jsonl_path):
            click.echo(f"copytrack: {jsonl_path}: {problem}: give a file of JSON lines", err=True)
            sys.exit(2)
        settings = Settings.from_env()
        # A small file is matched in this process: other processes each open their own
        # connections first (a few tenths of a second).
        processes = min(processes, 1 + jsonl_path.stat().st_size // SMALL_FILE_BYTES)
        try:
            # The pool first: its workers are forked before this process runs threads.
            with MatchPool(settings, processes, preload=["copytrack.cli"]) as pool:
                ctx = open_ready(settings)
                audit_sample(ctx, every=0)
                pool.match_here(ctx)
                bad = _check_jsonl(pool, jsonl_path, processes)
        except BrokenProcessPool:
            click.echo(
                f"copytrack: a process matching {jsonl_path} died (killed, or out of memory): "
                "the lines printed are complete; run again for the rest, with fewer "
                "--processes if memory is short",
                err=True,
            )
            sys.exit(2)
        sys.exit(1 if bad else 0)
    assert source is not None  # SOURCE or --jsonl, as checked above
    ctx = open_ready()
    audit_sample(ctx, every=0)  # "no match" must not come of an index that lost postings
    spans: list[tuple[int, int, str]] = []
    if ocr:
        text, spans = _read_url_with_ocr(source)
    else:
        text = _read_source(source)
    _print_matches(ctx, text, match_text(ctx, text), spans)
