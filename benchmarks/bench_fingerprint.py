"""Fingerprinting speed on the shared corpus, next to pypinyin baselines in the same run.

    .venv/bin/python -m benchmarks.bench_fingerprint [--baseline-chars 300000]

Measures chars/s of text → initials, of ``fingerprint`` (index side) and of
``query_fingerprints`` (every offset) — each as the numpy arrays the tracker uses
(``index_array``/``query_array``) and as the public list of ``Fingerprint``, on the
corpus as one text and one call per document — against
  * ``pypinyin.lazy_pinyin(text, style=Style.FIRST_LETTER)`` on the same text (the naive
    baseline; it is slow, so it runs on a prefix of ``--baseline-chars`` per language), and
  * a per-character Python dict lookup built from pypinyin's data (the obvious speed-up).
Prints a markdown table and writes it to benchmarks/results/fingerprint.md.
"""

from __future__ import annotations

import argparse
import platform
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pypinyin import Style, lazy_pinyin
from pypinyin.pinyin_dict import pinyin_dict

from benchmarks.shared_corpus import iter_documents, require_shared
from fingerprinter import fingerprint, index_array, query_array, query_fingerprints, to_letters

RESULTS = Path(__file__).resolve().parent / "results" / "fingerprint.md"


def chars_per_second(func: Callable[[str], object], text: str, repeat: int = 3) -> float:
    """Best of ``repeat`` runs (the first run also pays for building tables)."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        func(text)
        best = min(best, time.perf_counter() - started)
    return len(text) / best


def one_call_per_document(func: Callable[[str], object], docs: list[str], _text: str) -> None:
    """Fingerprint each document and drop the result, as a scan does (keeping them all
    would make the garbage collector walk ever more tuples)."""
    for doc in docs:
        func(doc)


def dict_lookup_initials() -> Callable[[str], str]:
    """Per-character dict lookup: the first reading's first letter, no vectorization."""
    table = {chr(cp): readings[0] for cp, readings in pinyin_dict.items()}

    def convert(text: str) -> str:
        get = table.get
        return "".join(get(ch, ch) for ch in text)

    return convert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-chars", type=int, default=300_000)
    args = parser.parse_args()
    require_shared()

    documents = {
        "zh": [d["text"] for d in iter_documents("zh_news", "zh_novel")],
        "en": [d["text"] for d in iter_documents("en_news", "en_novel")],
    }
    to_letters("warm up the lookup table")
    lookup = dict_lookup_initials()
    rows = []
    for lang, docs in documents.items():
        text = "".join(docs)
        prefix = text[: args.baseline_chars]
        naive = chars_per_second(
            lambda t: lazy_pinyin(t, style=Style.FIRST_LETTER), prefix, repeat=1
        )
        per_char = chars_per_second(lookup, prefix)
        for name, func in (
            ("text → initials", to_letters),
            ("index_array (index side, arrays)", index_array),
            ("fingerprint (index side, list of Fingerprint)", fingerprint),
            ("query_array (every offset, arrays)", query_array),
            ("query_fingerprints (every offset, list)", query_fingerprints),
        ):
            speed = chars_per_second(func, text)
            rows.append((lang, name, len(text), speed, speed / naive, speed / per_char))
        # What the tracker does: one call per article, so per-call overheads count too.
        for name, func in (
            ("index_array, one call per document", index_array),
            ("fingerprint, one call per document", fingerprint),
            ("query_array, one call per document", query_array),
            ("query_fingerprints, one call per document", query_fingerprints),
        ):
            speed = chars_per_second(partial(one_call_per_document, func, docs), text)
            rows.append((lang, name, len(text), speed, speed / naive, speed / per_char))
        rows.append(
            (lang, "baseline: lazy_pinyin FIRST_LETTER", len(prefix), naive, 1.0, naive / per_char)
        )
        rows.append(
            (lang, "baseline: per-char dict lookup", len(prefix), per_char, per_char / naive, 1.0)
        )

    lines = [
        f"Fingerprinting speed, one core ({platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}), {time.strftime('%Y-%m-%d')}",
        "",
        "| lang | step | chars | M chars/s | × lazy_pinyin | × dict lookup |",
        "|---|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {lang} | {name} | {n:,} | {speed / 1e6:.2f} | {vs_naive:.0f}× | {vs_dict:.1f}× |"
        for lang, name, n, speed, vs_naive, vs_dict in rows
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report, encoding="utf-8")


if __name__ == "__main__":
    main()
