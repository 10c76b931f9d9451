"""`copytrack eval`: accuracy of the matcher on a labelled benchmark of pirate-style copies."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from tqdm import tqdm

from fingerprinter import DEFAULT_PARAMS, FingerprintParams
from tracker.context import Context
from tracker.core.config import Settings
from tracker.masters.generation import open_ready
from tracker.matching.matcher import DEFAULT_MATCH_SETTINGS
from tracker.runtime.servers import stop_servers

from .testbed import testbed_missing


@contextmanager
def scratch_context(params: FingerprintParams = DEFAULT_PARAMS) -> Iterator[Context]:
    """A Context on fresh embedded servers in a temporary directory, stopped afterwards.

    The evaluation never touches the configured installation: it needs an empty library.
    """
    # SIGTERM too must unwind through the cleanup below, or the servers would outlive us.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    with tempfile.TemporaryDirectory(prefix="copytrack-eval-") as data_dir:
        try:
            ctx = open_ready(Settings.from_env({"COPYTRACK_DATA_DIR": data_dir}), params)
            try:
                yield ctx
            finally:
                ctx.close()
        finally:
            stop_servers(data_dir)


@click.command("eval")
@click.option(
    "--corpus",
    "corpus",
    multiple=True,
    type=click.Path(path_type=Path),
    help="JSONL file or directory of them (repeatable); default: ../shared/corpus, or the "
    "bundled testbed/corpus without it.",
)
@click.option("--masters", default=1000, show_default=True, help="Masters to register.")
@click.option("--suspects", default=3000, show_default=True, help="Suspects to match.")
@click.option(
    "--lang",
    type=click.Choice(["zh", "en", "all"]),
    default="all",
    show_default=True,
    help="Languages of the benchmark (split evenly).",
)
@click.option("--seed", default=0, show_default=True, help="Seed of the benchmark.")
@click.option(
    "--sweep",
    "do_sweep",
    is_flag=True,
    help="Compare settings (one parameter changed at a time) in memory instead.",
)
@click.option(
    "--memory",
    is_flag=True,
    help="Keep the index in memory (MemoryIndex) instead of the embedded servers.",
)
@click.option(
    "--synonyms",
    is_flag=True,
    help="Fingerprint with the synonym stream, as COPYTRACK_SYNONYMS=true installations do.",
)
@click.option(
    "--jobs",
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Processes that match suspects.",
)
@click.option(
    "--markdown",
    "markdown_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the Markdown report here.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the JSON report here.",
)
def eval_command(
    corpus: tuple[Path, ...],
    masters: int,
    suspects: int,
    lang: str,
    seed: int,
    do_sweep: bool,
    memory: bool,
    synonyms: bool,
    jobs: int,
    markdown_path: Path | None,
    json_path: Path | None,
) -> None:
    """Measure recall, precision and false positives on pirate-style copies of a corpus.

    Masters are drawn from the corpus (JSONL lines with "text"; "id", "lang", "kind",
    "book" or "category" are used when present); suspects are copies under attacks of
    several strengths, and negatives. The run uses fresh embedded servers in a temporary
    directory, never the configured library. Prints a Markdown report (per language and
    attack); see docs/accuracy.md for the method.
    """
    try:
        from testbed import evaluation
        from testbed.corpus import describe
        from testbed.paraphrase import ThesaurusMissing
        from testbed.rewrite import CilinMissing
    except ModuleNotFoundError as err:
        raise testbed_missing(err) from None
    if not corpus:
        click.echo(f"corpus: {describe(evaluation.DEFAULT_CORPUS)}", err=True)
    try:
        docs, problems = evaluation.load_documents(corpus or (evaluation.DEFAULT_CORPUS,))
    except FileNotFoundError as err:
        raise click.ClickException(
            f"{err}: pass --corpus a JSONL file or a folder of them (testbed/corpus is one)"
        ) from None
    for problem in problems:
        click.echo(f"warning: {problem}", err=True)
    langs = evaluation.LANGS if lang == "all" else (lang,)
    try:
        bench = evaluation.build_benchmark(docs, masters, suspects, langs, seed)
    except (ValueError, CilinMissing, ThesaurusMissing) as err:
        raise click.ClickException(str(err)) from None
    show = sys.stderr.isatty()
    data: list[dict[str, Any]] | dict[str, Any]  # a sweep's points, or one evaluation
    params = replace(DEFAULT_PARAMS, synonyms=synonyms)
    with scratch_context(params) as ctx:
        if do_sweep:
            points = evaluation.sweep_settings(params, DEFAULT_MATCH_SETTINGS)
            total = len(points) * len(bench.suspects)
            with tqdm(total=total, desc="sweep", unit="suspect", disable=not show) as bar:
                results = evaluation.sweep(ctx, bench, points, jobs, bar.update)
            markdown, data = evaluation.sweep_markdown(results), evaluation.sweep_json(results)
        else:
            with tqdm(
                total=len(bench.suspects), desc="matching", unit="suspect", disable=not show
            ) as bar:
                result = evaluation.evaluate(
                    ctx, bench, DEFAULT_MATCH_SETTINGS, memory, jobs, bar.update
                )
            markdown, data = evaluation.report_markdown(result), evaluation.report_json(result)
    click.echo(markdown)
    evaluation.write_reports(markdown_path, json_path, markdown, data)
