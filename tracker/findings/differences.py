"""Character-level differences between a work's passage and its copy on a page, each named
for what a reviewer or a court would call it.

Copies are edited to dodge exact matching: characters swapped for homophones (same
reading), simplified ones written in traditional form, words changed, added or left out.
The fingerprints see through all of that; the evidence should show it. Differences are
found with difflib on words first (segmented as the synonym stream segments them,
`fingerprinter.segment_words`), then on the characters of the runs of words that differ;
a replaced run of the same length is classified character by character:

- ``synonym``: a word swapped for another of its thesaurus class (`fingerprinter.are_synonyms`:
  the words a rewrite swaps and the synonym stream sees through), or an English word for
  one sharing a WordNet synset with it (`fingerprinter.english_synonyms`);
- ``traditional``: the page's character is the traditional form of the work's (OpenCC);
- ``homophone``: another character with the same reading (pypinyin, tones ignored);
- ``changed``, ``added`` (on the page only), ``omitted`` (in the work only);
- ``same``: identical, or differing in whitespace only (line breaks, indentation).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from fingerprinter import segment_words
from fingerprinter import words_are_synonyms as are_synonyms

SAME, SYNONYM, TRADITIONAL, HOMOPHONE, CHANGED, ADDED, OMITTED = (
    "same", "synonym", "traditional", "homophone", "changed", "added", "omitted"
)  # fmt: skip
#: Each kind of difference, as a reviewer reads it.
KIND_LABELS = {
    SYNONYM: "Synonym",
    TRADITIONAL: "Traditional form",
    HOMOPHONE: "Homophone",
    CHANGED: "Changed",
    ADDED: "Added on the page",
    OMITTED: "Left out of the copy",
}


@dataclass(frozen=True)
class Piece:
    """A run of one kind: the work's characters and the page's (one side empty for added
    and omitted runs)."""

    kind: str
    work: str
    page: str


@lru_cache(maxsize=1)
def _to_simplified() -> Any:
    import opencc  # loaded on first use: only evidence needs it

    return opencc.OpenCC("t2s")


@lru_cache(maxsize=65536)
def _reading(char: str) -> str:
    from pypinyin import Style, lazy_pinyin

    readings = lazy_pinyin(char, style=Style.NORMAL, errors="ignore")
    return readings[0] if readings else ""  # none for punctuation, Latin, digits


def _kind_of(work_char: str, page_char: str) -> str:
    if work_char == page_char:
        return SAME
    if _to_simplified().convert(page_char) == work_char:
        return TRADITIONAL
    reading = _reading(work_char)
    if reading and reading == _reading(page_char):
        return HOMOPHONE
    return CHANGED


def _append(pieces: list[Piece], kind: str, work: str, page: str) -> None:
    if pieces and pieces[-1].kind == kind:
        last = pieces[-1]
        pieces[-1] = Piece(kind, last.work + work, last.page + page)
    else:
        pieces.append(Piece(kind, work, page))


def differences(work: str, page: str) -> list[Piece]:
    """The two texts as runs of same and differing characters, in order: words swapped for
    synonyms whole, other differing runs of words character by character."""
    pieces: list[Piece] = []
    work_words, page_words = segment_words(work), segment_words(page)
    matcher = SequenceMatcher(None, work_words, page_words, autojunk=False)
    for op, w1, w2, p1, p2 in matcher.get_opcodes():
        pairs = list(zip(work_words[w1:w2], page_words[p1:p2], strict=False))
        if op == "replace" and w2 - w1 == p2 - p1 and any(are_synonyms(*p) for p in pairs):
            for a, b in pairs:
                if are_synonyms(a, b):
                    _append(pieces, SYNONYM, a, b)
                else:
                    _characters(pieces, a, b)
        else:
            _characters(pieces, "".join(work_words[w1:w2]), "".join(page_words[p1:p2]))
    return pieces


def _characters(pieces: list[Piece], work: str, page: str) -> None:
    """The character-level differences of two runs, appended to ``pieces``."""
    matcher = SequenceMatcher(None, work, page, autojunk=False)
    for op, w1, w2, p1, p2 in matcher.get_opcodes():
        left, right = work[w1:w2], page[p1:p2]
        if op == "equal" or not (left.strip() or right.strip()):
            _append(pieces, SAME, left, right)
        elif op == "replace" and len(left) == len(right):
            for a, b in zip(left, right, strict=True):
                _append(pieces, _kind_of(a, b), a, b)
        elif op == "replace":
            _append(pieces, CHANGED, left, right)
        elif op == "delete":
            _append(pieces, OMITTED, left, "")
        else:
            _append(pieces, ADDED, "", right)


def tally(pieces: list[Piece]) -> dict[str, int]:
    """Characters of each kind (counted on the page; omitted ones in the work)."""
    counts: Counter[str] = Counter()
    for piece in pieces:
        counts[piece.kind] += len(piece.work if piece.kind == OMITTED else piece.page)
    return {kind: counts[kind] for kind in (SAME, *KIND_LABELS)}
