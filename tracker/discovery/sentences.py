"""The sentences of a work worth asking a search engine for: long enough to be exact,
short enough for a query, and rarest in the library — a sentence whose fingerprints other
works share (a chapter heading, a publisher's footer, a stock phrase) finds their copies
or boilerplate, not this work's."""

from __future__ import annotations

import re

import numpy as np

from fingerprinter.fingerprint import query_array

from ..context import Context

#: Where a sentence ends: Chinese and Latin full stops, question and exclamation marks,
#: line breaks.
_END = re.compile(r"(?<=[。！？!?…])|(?<=[.;；])\s+|\n+")
#: Search engines take phrases up to a few dozen words; longer ones match nothing.
MIN_CHARS = 16
MAX_CHARS = 64
#: Latin sentences are measured in letters: 16 Chinese characters carry as much as ~60.
_LATIN_FACTOR = 4


def candidate_sentences(text: str) -> list[str]:
    """The work's sentences of a searchable length, in order, without repeats."""
    found: dict[str, None] = {}
    for piece in _END.split(text):
        sentence = " ".join(piece.split()).strip(" \"'“”「」『』")
        size = _weight(sentence)
        if MIN_CHARS <= size <= MAX_CHARS:
            found.setdefault(sentence)
    return list(found)


def _weight(sentence: str) -> float:
    """A sentence's length in Chinese characters, Latin text counted at a quarter."""
    latin = sum(1 for c in sentence if c.isascii())
    return len(sentence) - latin + latin / _LATIN_FACTOR


def distinctive_sentences(ctx: Context, master_id: int, text: str, count: int) -> list[str]:
    """Up to ``count`` sentences of master ``master_id`` (text ``text``), rarest in the
    library first: the share of a sentence's fingerprints listed for this master only. A
    sentence whose fingerprints other works mostly share is never chosen."""
    sentences = candidate_sentences(text)
    scored: list[tuple[float, int, str]] = []
    for position, sentence in enumerate(sentences):
        values = np.unique(query_array(sentence, ctx.params).values)
        postings = ctx.index.lookup(values.tolist()) if len(values) else []
        own = sum(1 for ids in postings if tuple(ids) == (master_id,))
        shared = sum(1 for ids in postings if len(ids) > 1)
        if shared * 2 > len(postings):  # mostly other works' too: common or boilerplate
            continue
        # A short sentence may hold no indexed granule: asked after the distinctive ones.
        scored.append((-own / len(postings) if postings else 0.0, position, sentence))
    scored.sort()
    return [sentence for _, _, sentence in scored[:count]]
