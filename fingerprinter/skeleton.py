"""The skeleton letter stream: what a synonym rewrite (洗稿) leaves of a Chinese text.

A rewriting tool swaps common words for others of its own word list — content words and
function words alike (的 → 之, 因为 → 由于, 表示 → 指出) — so no thesaurus of the
matcher's can agree with it for long. What it leaves are the facts and the shape: names of
places, organisations and things (a dictionary's proper nouns), numbers, Latin words, and
the sentence's words and punctuation in their order (one word swapped for one word). Here
every word the dictionary knows other than a proper noun becomes one letter, ``WORD``, a
proper noun or a word the dictionary does not know (a name, a rare term) keeps its pinyin
initials, a run of digits becomes ``NUMBER``, and clause and sentence punctuation
``CLAUSE`` and ``STOP``: 新华社北京3月5日电，国务院总理… → ``xhs`` (nt) ``bj`` (ns) ``E``
``i`` … ``V``. Person names are words like any other: rewrites scrub them (张三 → 张某).

Segmentation is jieba's (its default dictionary, no HMM guessing: deterministic), loaded
without its cache file (`segmenter`), so nothing is written; the part-of-speech tags are
that dictionary's. ``WORD``, ``CLAUSE``, ``STOP`` and ``NUMBER`` are letters no pinyin
syllable starts with, or seldom does.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache

import jieba
import numpy as np

from .fingerprint import FingerprintArray
from .initials import CJK_FLAG, DROP, UNKNOWN, Letters, to_letters

#: Letters of the skeleton's classes (codes 0..25, flagged as Chinese letters).
WORD = ord("i") - ord("a")
CLAUSE = ord("v") - ord("a")
STOP = ord("o") - ord("a")
NUMBER = ord("e") - ord("a")
#: jieba's tags of proper nouns: places, organisations, other names (person names not:
#: a rewrite scrubs them).
PROPER_TAGS = frozenset({"ns", "nt", "nz"})
_CLAUSE_MARKS = frozenset("，,、；;：:")
_CLASS_CODES = np.array([WORD, CLAUSE, STOP, NUMBER], np.uint8) | np.uint8(CJK_FLAG)
# Letters that say nothing of a text: the classes, and unknown letters (private-use code
# points, which align with any letter: granules of them would match every skeleton).
_NOT_OWN = np.append(_CLASS_CODES, np.uint8(UNKNOWN))
_STOP_MARKS = frozenset("。！？!?…")

jieba.setLogLevel(60)  # jieba announces its dictionary load on stderr


@dataclass(frozen=True)
class Skeleton(Letters):
    """A Chinese text's skeleton stream: fingerprinted with its own granules, only those
    holding enough letters that are no class letter (`known_granules`)."""


@lru_cache(maxsize=1)
def segmenter() -> jieba.Tokenizer:
    """jieba's tokenizer on its default dictionary, built in memory: jieba would otherwise
    read and write a cache file in the temporary directory."""
    tokenizer = jieba.Tokenizer()
    with tokenizer.get_dict_file() as dictionary:
        tokenizer.FREQ, tokenizer.total = tokenizer.gen_pfdict(dictionary)
    tokenizer.initialized = True
    return tokenizer


@lru_cache(maxsize=1)
def _proper_nouns() -> frozenset[str]:
    """The words jieba's dictionary tags as proper nouns (`PROPER_TAGS`)."""
    words = []
    with segmenter().get_dict_file() as dictionary:
        for line in dictionary.read().decode("utf-8").splitlines():
            word, _, tag = line.split(" ")
            if tag in PROPER_TAGS:
                words.append(word)
    return frozenset(words)


def segment(text: str) -> list[str]:
    """The text in words, as the skeleton (and the synonym stream) segments it."""
    return list(segmenter().lcut(text, HMM=False))


def skeleton_letters(text: str, latin_mode: str = "letters") -> Skeleton:
    """The skeleton stream of a text; offsets point into ``text`` (a class letter at its
    word's first character)."""
    base = to_letters(text, latin_mode)
    freq, proper = segmenter().FREQ, _proper_nouns()
    words = segment(text)
    ends = np.cumsum(np.fromiter(map(len, words), np.int64, len(words)))
    starts = ends - np.fromiter(map(len, words), np.int64, len(words))
    # Each word's class letter, or DROP where it keeps its own letters (or has none).
    classes = np.fromiter((_class_of(word, freq, proper) for word in words), np.uint8, len(words))
    keeps = classes[np.searchsorted(ends, base.offsets, side="right")] == DROP
    own, own_codes = base.offsets[keeps], base.codes[keeps]
    marked = np.flatnonzero(classes != DROP)
    offsets = np.concatenate((own, starts[marked]))
    order = np.argsort(offsets, kind="stable")
    codes = np.concatenate((own_codes, classes[marked] | np.uint8(CJK_FLAG)))
    return Skeleton(codes[order], offsets[order])


def _class_of(word: str, freq: dict[str, int], proper: frozenset[str]) -> int:
    if freq.get(word) and word not in proper:
        return WORD
    if word.isdecimal():
        return NUMBER
    if word in _CLAUSE_MARKS:
        return CLAUSE
    if word in _STOP_MARKS:
        return STOP
    return DROP


def known_granules(
    fingerprints: FingerprintArray, letters: Letters, granule: int, minimum: int, sparse: int = 0
) -> FingerprintArray:
    """The granules of ``granule`` letters holding at least ``minimum`` that are no class
    letter (a name, a number, a rare word): a run of ``WORD`` letters and commas is what
    every text has, so its fingerprints would only make chance candidates.

    With fewer than ``sparse`` such granules, those holding one letter fewer are kept too
    (a short text, or one of few names); with none even then, those holding one own letter
    (a brief with a single name or number in it, which would otherwise have no granule at
    all) — never granules of class letters only."""
    own = ~np.isin(letters.codes, _NOT_OWN)
    total = np.concatenate(([0], np.cumsum(own)))
    first = fingerprints.first_letters
    last = np.minimum(first + granule, len(own))
    held = total[last] - total[first]
    keep = held >= minimum
    if np.count_nonzero(keep) < sparse:
        keep = held >= minimum - 1
        if not keep.any():
            keep = held >= max(minimum - 2, 1)
    return FingerprintArray(fingerprints.values[keep], fingerprints.starts[keep],
                            fingerprints.ends[keep], fingerprints.checks[keep],
                            fingerprints.first_letters[keep])  # fmt: skip


def kept_share(pairs: Iterable[tuple[str, str]]) -> float:
    """Share of the letters and digits of the copies (each pair: a passage of the work, the
    passage of the page aligned with it) that lie in runs of two or more the work's passage
    has in the same order: a rewrite keeps the words it did not swap where they were (the
    names, the numbers, a third of the others at least), two texts whose skeletons align
    by chance share only scattered common characters."""
    kept = total = 0
    for work, page in pairs:
        work, page = _alnum(work), _alnum(page)
        blocks = SequenceMatcher(None, work, page, autojunk=False).get_matching_blocks()
        kept += sum(block.size for block in blocks if block.size >= 2)
        total += len(page)
    return kept / max(total, 1)


def kept_numbers(pairs: Iterable[tuple[str, str]]) -> float:
    """Share of the numbers in the copies' page passages (each pair as for `kept_share`)
    that the work's passages have too, any of them (1.0 without any): a rewrite swaps
    words, not facts, and a text written from the same template as the work (a daily
    market report, an event notice) shares its frame but not its figures and dates."""
    in_work: set[str] = set()
    in_page: list[str] = []
    for work, page in pairs:
        in_work.update(_NUMBER.findall(unicodedata.normalize("NFKC", work)))
        in_page += _NUMBER.findall(unicodedata.normalize("NFKC", page))
    return sum(number in in_work for number in in_page) / len(in_page) if in_page else 1.0


_NUMBER = re.compile(r"[0-9]+")


def _alnum(text: str) -> str:
    return "".join(filter(str.isalnum, text))
