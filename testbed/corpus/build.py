"""Rebuild the bundled demo corpus from the shared corpus, deterministically.

    python -m testbed.corpus.build [SHARED_CORPUS_DIR]

Only public-domain texts go in (see README.md beside this file): chapter openings of the
three classical novels and of Project Gutenberg books, and "news-like" documents cut from
other chapters of the same books. The shared corpus's news stays its publishers'
copyright and is never bundled. Same input, same bytes: documents are chosen by position,
JSON keys are sorted and gzip records no time.
"""

from __future__ import annotations

import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from tracker.core.jsonl import BadLine, read_jsonl

from . import BUNDLED_CORPUS, SHARED_CORPUS

ZH_BOOKS = ("红楼梦", "三国演义", "西游记")
# Authors dead for more than a century or close to it: public domain everywhere.
EN_BOOKS = (
    "Pride and Prejudice",
    "Great Expectations",
    "Moby Dick",
    "Adventures of Huckleberry Finn",
    "Jane Eyre",
    "Dracula",
)
CHAPTERS_PER_BOOK = {"zh": 10, "en": 2}  # chapter openings (the "novel" files)
OPENING_CHARS = {"zh": 3_000, "en": 6_000}
NEWS_DOCS = {"zh": 120, "en": 60}  # excerpts of later chapters (the "news" files)
NEWS_CHARS = {"zh": (450, 1_100), "en": (900, 2_000)}


def _by_book(corpus: Path, name: str, books: tuple[str, ...]) -> dict[str, list[dict]]:
    chapters: dict[str, list[dict]] = {book: [] for book in books}
    for item in read_jsonl(corpus / f"{name}.jsonl.gz"):
        if isinstance(item, BadLine):
            raise ValueError(str(item))
        doc = item[1]
        if doc.get("book") in chapters:
            chapters[doc["book"]].append(doc)
    return chapters


def _cut(text: str, low: int, high: int) -> Iterator[str]:
    """Runs of whole lines of ``low`` to ``high`` characters, in order."""
    piece: list[str] = []
    size = 0
    for line in text.split("\n"):
        if size + len(line) > high and size >= low:
            yield "\n".join(piece).strip()
            piece, size = [], 0
        piece.append(line)
        size += len(line) + 1
    if size >= low:
        yield "\n".join(piece).strip()


def _opening(text: str, limit: int) -> str:
    return next(_cut(text, min(limit, len(text)) // 2, limit), text[:limit])


def _source(doc: dict) -> dict:
    return {k: doc[k] for k in ("book", "author", "source") if k in doc}


def build(lang: str, corpus: Path) -> tuple[list[dict], list[dict]]:
    """(chapter openings, news-like excerpts) of one language."""
    name, books = ("zh_novel", ZH_BOOKS) if lang == "zh" else ("en_novel", EN_BOOKS)
    chapters = _by_book(corpus, name, books)
    per_book = CHAPTERS_PER_BOOK[lang]
    openings = [doc for book in books for doc in chapters[book][:per_book]]
    novels = [
        {
            **_source(doc),
            "id": f"B-{name}-{n:05d}",
            "title": doc["title"],
            "text": _opening(doc["text"], OPENING_CHARS[lang]),
            "lang": lang,
            "kind": "novel",
        }
        for n, doc in enumerate(openings)
    ]
    # One excerpt (the middle run of lines) per later chapter, books interleaved.
    later = [doc for book in books for doc in chapters[book][per_book:]]
    interleaved = [doc for _, doc in sorted(enumerate(later), key=lambda nd: (nd[0] % 7, nd[0]))]
    low, high = NEWS_CHARS[lang]
    news: list[dict] = []
    for doc in interleaved:
        pieces = list(_cut(doc["text"], low, high))
        if not pieces:
            continue
        news.append(
            {
                **_source(doc),
                "id": f"B-{lang}_news-{len(news):05d}",
                "title": f"{doc['title']} (excerpt)",
                "text": pieces[len(pieces) // 2],
                "lang": lang,
                "kind": "news-like",
            }
        )
        if len(news) == NEWS_DOCS[lang]:
            break
    return novels, news


def write(path: Path, docs: list[dict]) -> None:
    lines = "".join(json.dumps(doc, ensure_ascii=False, sort_keys=True) + "\n" for doc in docs)
    with (
        path.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as out,
    ):
        out.write(lines.encode())


def main(argv: list[str]) -> int:
    corpus = Path(argv[0]) if argv else SHARED_CORPUS
    if not (corpus / "zh_novel.jsonl.gz").exists():
        print(f"{corpus}: no shared corpus there; pass its folder", file=sys.stderr)
        return 2
    for lang in ("zh", "en"):
        novels, news = build(lang, corpus)
        write(BUNDLED_CORPUS / f"{lang}_novel.jsonl.gz", novels)
        write(BUNDLED_CORPUS / f"{lang}_news.jsonl.gz", news)
        print(f"{lang}: {len(novels)} chapter openings, {len(news)} news-like excerpts")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
