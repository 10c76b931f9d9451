"""Benchmark bytes → main text on the shared web pages with ground truth.

Compares (a) plain trafilatura on the raw bytes, (b) plain trafilatura on the string from
``decode_html`` and (c) ``extractor.extraction.extract``. Scores are bag-of-tokens
precision / recall / F1 per page (Chinese: CJK characters; other languages: lower-cased
``\\w+`` words), averaged over pages. Usage::

    .venv/bin/python -m benchmarks.bench_extraction [--webpages DIR] [--jobs 2] [--limit N]

A full run writes benchmarks/results/extraction.md; a --limit run only prints.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import trafilatura

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from benchmarks.shared_corpus import WEBPAGES_DIR, require_shared  # noqa: E402
from extractor.decoding import UnusableContent, decode_html  # noqa: E402
from extractor.extraction import extract  # noqa: E402

DEFAULT_WEBPAGES = WEBPAGES_DIR
DEFAULT_OUTPUT = REPO / "benchmarks" / "results" / "extraction.md"
LANGS = ("zh", "en")
HUMAN_TRUTH = ("human-full-text", "human-reviewed-full-text", "human-markdown-flattened")
AGREEMENT_ONLY = ("readability-js-expected-output",)  # a tool's output, not truth
METHODS = ("plain-raw", "plain-decoded", "ours")

_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef]")
_WORD = re.compile(r"\w+")


def tokens(text: str, lang: str) -> Counter[str]:
    """Scoring tokens: CJK characters for Chinese, lower-cased words otherwise."""
    if lang == "zh":
        return Counter(_CJK_CHAR.findall(text))
    return Counter(_WORD.findall(text.lower()))


def prf(predicted: str, truth: str, lang: str) -> tuple[float, float, float]:
    """Bag-of-tokens precision, recall and F1 of one page."""
    pred, gold = tokens(predicted, lang), tokens(truth, lang)
    overlap = sum((pred & gold).values())
    n_pred, n_gold = sum(pred.values()), sum(gold.values())
    if not n_pred or not n_gold:
        same = n_pred == n_gold  # both empty is a perfect answer
        return float(same), float(same), float(same)
    p, r = overlap / n_pred, overlap / n_gold
    return p, r, (2 * p * r / (p + r) if overlap else 0.0)


def load_pages(webpages: Path, kinds: tuple[str, ...] = HUMAN_TRUTH + AGREEMENT_ONLY) -> list[dict]:
    """Manifest entries in LANGS whose truth kind is in ``kinds``."""
    with open(webpages / "manifest.jsonl", encoding="utf-8") as fh:
        entries = [json.loads(line) for line in fh if line.strip()]
    return [e for e in entries if e["lang"] in LANGS and e.get("truth_kind") in kinds]


def read_page(webpages: Path, entry: dict) -> bytes:
    """Raw bytes of a page (gunzipped if stored compressed)."""
    data = (webpages / entry["file"]).read_bytes()
    return gzip.decompress(data) if entry["file"].endswith(".gz") else data


@dataclass(frozen=True)
class PageResult:
    lang: str
    kind: str
    scores: dict[str, tuple[float, float, float]]
    seconds: dict[str, float]


def _plain(html: str | bytes, url: str | None) -> str:
    return trafilatura.extract(html, url=url) or ""


def _decode(body: bytes) -> str:
    try:
        return decode_html(body).text
    except UnusableContent:
        return ""


def _run_page(job: tuple[Path, dict]) -> PageResult:
    webpages, entry = job
    body, url, truth = read_page(webpages, entry), entry.get("url"), entry["truth_text"]
    methods = {
        "plain-raw": lambda: _plain(body, url),
        "plain-decoded": lambda: _plain(_decode(body), url),
        "ours": lambda: extract(_decode(body), url).text,
    }
    scores, seconds = {}, {}
    for name, run in methods.items():
        # CPU time: other processes on the machine must not skew the speed figures.
        start = time.process_time()
        text = run()
        seconds[name] = time.process_time() - start
        scores[name] = prf(text, truth, entry["lang"])
    return PageResult(entry["lang"], entry["truth_kind"], scores, seconds)


def run(webpages: Path, jobs: int, limit: int | None = None) -> list[PageResult]:
    """Score every selected page with every method (in ``jobs`` processes)."""
    pages = load_pages(webpages)[:limit]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(_run_page, [(webpages, e) for e in pages], chunksize=4))


def _groups(results: list[PageResult]) -> Iterator[tuple[str, str, list[PageResult]]]:
    by_key: dict[tuple[str, str], list[PageResult]] = defaultdict(list)
    for r in results:
        by_key[(r.lang, r.kind)].append(r)
    for lang in LANGS:
        human = [r for r in results if r.lang == lang and r.kind in HUMAN_TRUTH]
        if human:
            yield lang, "**all human truth**", human
        for kind in HUMAN_TRUTH + AGREEMENT_ONLY:
            if by_key[(lang, kind)]:
                label = kind + (" (agreement only)" if kind in AGREEMENT_ONLY else "")
                yield lang, label, by_key[(lang, kind)]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def to_markdown(results: list[PageResult], elapsed: float, jobs: int) -> str:
    """The results table (macro averages over pages) as markdown."""
    head = ["lang", "truth kind", "pages"]
    for m in METHODS:
        head += [f"{m} F1", f"{m} P", f"{m} R", f"{m} pages/s"]
    head += ["F1 ours/plain-raw", "speed ours/plain-raw"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lang, label, group in _groups(results):
        row = [lang, label, str(len(group))]
        speed = {}
        for m in METHODS:
            p, r, f = (_mean([g.scores[m][i] for g in group]) for i in range(3))
            speed[m] = len(group) / max(sum(g.seconds[m] for g in group), 1e-9)
            row += [f"{f:.3f}", f"{p:.3f}", f"{r:.3f}", f"{speed[m]:.1f}"]
        plain_f1 = _mean([g.scores["plain-raw"][2] for g in group])
        ours_f1 = _mean([g.scores["ours"][2] for g in group])
        row += [f"{ours_f1 / max(plain_f1, 1e-9):.2f}", f"{speed['ours'] / speed['plain-raw']:.2f}"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(
        [
            "# Extraction benchmark (bytes → main text)",
            "",
            "Generated by `benchmarks/bench_extraction.py` on the shared split of "
            "`../shared/webpages`. Token-level bag-of-tokens scores, macro-averaged over "
            "pages: Chinese per CJK character, English per lower-cased word. "
            "*plain-raw* = `trafilatura.extract(raw bytes)`, *plain-decoded* = "
            "`trafilatura.extract(decode_html(bytes).text)`, *ours* = "
            "`extract(decode_html(bytes).text)`; each includes its decoding. pages/s is per "
            "core (CPU time inside the worker). Readability.js expected outputs are a tool's "
            "output: agreement, not accuracy.",
            "",
            *lines,
            "",
            f"{len(results)} pages, {elapsed:.0f} s wall time on {jobs} worker processes.",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--webpages", type=Path, default=DEFAULT_WEBPAGES)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="first N pages only")
    parser.add_argument(
        "--output", type=Path, default=None, help=f"default {DEFAULT_OUTPUT} (full runs only)"
    )
    args = parser.parse_args(argv)
    require_shared(args.webpages)
    start = time.perf_counter()
    results = run(args.webpages, args.jobs, args.limit)
    report = to_markdown(results, time.perf_counter() - start, args.jobs)
    # A partial run (--limit) must not overwrite the recorded full results.
    output = args.output or (DEFAULT_OUTPUT if args.limit is None else None)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(report, encoding="utf-8")
    print(report)


if __name__ == "__main__":
    main()
