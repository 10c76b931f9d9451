"""`copytrack demo`: the end-to-end story on the embedded default."""

from __future__ import annotations

import random
from itertools import islice
from pathlib import Path

import click

from fingerprinter import align, index_array, query_array

from ..jsonl import BadLine, read_jsonl


def pirate(text: str, rng: random.Random) -> str:
    """A lightly edited copy: a few characters dropped and an ad line after every paragraph."""
    kept = "".join(ch for ch in text if rng.random() > 0.03)
    return "\n".join(p + "\n更多精彩内容请关注本站" for p in kept.split("\n"))


def run_demo(documents: list[dict], seed: int = 7) -> list[str]:
    """Fingerprint masters, then find which master each pirated or unrelated text copies."""
    rng = random.Random(seed)
    masters, strangers = documents[:-5], documents[-5:]
    indexed = {doc["id"]: set(index_array(doc["text"]).values.tolist()) for doc in masters}
    suspects = [(f"copy of {d['id']}", pirate(d["text"], rng)) for d in rng.sample(masters, 5)]
    suspects += [(f"unrelated {d['id']}", d["text"]) for d in strangers]
    lines = []
    for name, text in suspects:
        query = set(query_array(text).values.tolist())
        hits = {mid: len(fps & query) for mid, fps in indexed.items()}
        best = max(hits, key=hits.get)
        if hits[best] == 0:
            lines.append(f"{name:>32}: no match")
            continue
        master = next(d for d in masters if d["id"] == best)
        found = align(master["text"], text)
        lines.append(
            f"{name:>32}: copies {best} ({hits[best]} granule hits, "
            f"{found.master_coverage:.0%} of the work, {len(found.spans)} passages)"
        )
    return lines


@click.command()
@click.option(
    "--corpus",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=Path("../shared/corpus/zh_news.jsonl.gz"),
    show_default=True,
    help="JSONL file of works to use as the library.",
)
def demo(corpus: Path) -> None:
    """Run the demo: a library from the shared corpus, pirated copies, and what copytrack finds."""
    documents = [
        item[1] for item in islice(read_jsonl(corpus), 105) if not isinstance(item, BadLine)
    ]
    for line in run_demo(documents):
        click.echo(line)
