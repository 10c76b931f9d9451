"""Text → stream of initial letters, with a map back to the original text.

Every Chinese character becomes the first letter of its first pinyin reading, taken
from pypinyin's own per-character data (``pinyin_dict``), so homophone substitutions
give the same letters; traditional characters take the letter of their simplified form
(OpenCC's character table), compatibility ideographs and full-width forms that of their
normalized form. Per-character readings rather than
phrase readings: phrase context can change a reading at the edge of a copied fragment.

Latin-script text contributes every letter (``latin_mode="letters"``) or only the first
letter of each word (``"initials"``); measured on the shared English corpus, word
initials alone leave too few letters per granule to discriminate (see docs/accuracy.md).
Digits, punctuation, whitespace and control characters are dropped, so formatting noise
never changes the stream. A word written in pinyin inside Chinese text (``xiaoshuo`` for
小说) gives the initials of its syllables, as the characters would (``pinyin_runs``).

The conversion is a table lookup over code points, vectorized with numpy: the table is
built once per process from pypinyin's data and cached.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources, util
from pathlib import Path

import numpy as np

from .pinyin_runs import pinyin_runs

#: Table value for code points that contribute nothing (punctuation, digits, space, …).
DROP = 255
#: Flag bit set on letters that come from a CJK ideograph (used to pick a reference frame).
CJK_FLAG = 0x80
ALPHABET_LETTERS = 26  # codes below this are Latin letters

_MAX_CODEPOINT = 0x110000
#: The letter of a private-use code point: unknown (a "u" flagged as Chinese, which no
#: pinyin syllable starts with; see fingerprinter.unknown).
UNKNOWN = CJK_FLAG | (ord("u") - ord("a"))
_PRIVATE_USE_RANGES = ((0xE000, 0xF900), (0xF0000, 0xFFFFE), (0x100000, 0x10FFFE))

# Blocks whose compatibility forms normalize (NFKC/NFKD) to something with a reading:
# Latin with diacritics, full-width forms, Kangxi radicals, compatibility ideographs.
_NORMALIZED_RANGES = (
    (0x00C0, 0x0250),
    (0x1E00, 0x1F00),
    (0x2E80, 0x2FE0),
    (0x3000, 0x3040),
    (0xF900, 0xFB00),
    (0xFF00, 0xFFF0),
    (0x2F800, 0x2FA20),
)


@dataclass(frozen=True)
class Letters:
    """The letter stream of a text.

    ``codes`` holds 0..25 for a..z, with ``CJK_FLAG`` set on letters from ideographs;
    ``offsets[i]`` is the index in the original ``str`` of the character that produced
    letter ``i``.
    """

    codes: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.codes)

    @property
    def letters(self) -> np.ndarray:
        """Letter codes 0..25 without the CJK flag."""
        return self.codes & ~np.uint8(CJK_FLAG)

    @property
    def is_cjk(self) -> np.ndarray:
        return (self.codes & CJK_FLAG) != 0

    def as_string(self) -> str:
        """The stream as lowercase ASCII letters (for tests and debugging)."""
        return (self.letters + ord("a")).astype(np.uint8).tobytes().decode("ascii")


def _letter_of_pinyin(reading: str) -> int | None:
    first = unicodedata.normalize("NFKD", reading[:1])[:1].lower()
    if "a" <= first <= "z":
        return ord(first) - ord("a")
    return None


def _traditional_pairs() -> Iterator[tuple[int, int]]:
    """(traditional, simplified) code points from OpenCC's character table."""
    data = resources.files("opencc").joinpath("dictionary", "TSCharacters.txt")
    for line in data.read_text("utf-8").splitlines():
        traditional, _, simplified = line.partition("\t")
        simplified = simplified.split(" ", 1)[0]
        if len(traditional) == 1 and len(simplified) == 1:
            yield ord(traditional), ord(simplified)


def _unify_traditional(table: np.ndarray) -> None:
    """Give a traditional character the letter of its simplified form.

    Their first pypinyin readings differ for ~600 pairs (長 zhǎng vs 长 cháng); a copy
    converted to traditional characters must keep its letters.
    """
    for traditional, simplified in _traditional_pairs():
        if table[simplified] != DROP:
            table[traditional] = table[simplified]
        elif table[traditional] != DROP:
            table[simplified] = table[traditional]


def pinyin_readings() -> dict[int, str]:
    """pypinyin's readings of single characters: code point → "reading,reading,…".

    Read from the data file pypinyin ships them in when it is there: importing pypinyin
    also loads its phrase dictionary and segmenter (0.15 s, in every process that matches)
    for readings a table of single characters never uses.
    """
    spec = util.find_spec("pypinyin")  # finds the package without importing it
    if spec is not None and spec.origin is not None:
        data = Path(spec.origin).with_name("pinyin_dict.json")
        if data.is_file():
            readings = json.loads(data.read_text("utf-8"))
            return {int(codepoint): reading for codepoint, reading in readings.items()}
    from pypinyin.pinyin_dict import pinyin_dict

    return pinyin_dict


@lru_cache(maxsize=1)
def initial_table() -> np.ndarray:
    """Code point → letter code table (uint8, DROP for characters without a letter)."""
    table = np.full(_MAX_CODEPOINT, DROP, dtype=np.uint8)
    for latin in range(26):
        table[ord("a") + latin] = latin
        table[ord("A") + latin] = latin
    readings = pinyin_readings()
    # A character's letter is its first reading's first letter, tone marks dropped: a
    # function of that one character, of which there are a few dozen (~3x faster than
    # each of the 42,000 readings in turn, in every process that starts).
    firsts = [reading[:1] for reading in readings.values()]
    letter_of = {first: _letter_of_pinyin(first) for first in set(firsts)}
    codes = np.array([DROP if (letter := letter_of[first]) is None else letter | CJK_FLAG
                      for first in firsts], dtype=np.uint8)  # fmt: skip
    codepoints = np.fromiter(readings, dtype=np.int64, count=len(readings))
    # 〇 and a few symbols have readings but are not ideographs; keep them all.
    lettered = codes != DROP
    table[codepoints[lettered]] = codes[lettered]
    _unify_traditional(table)
    # Private-use code points are characters a web font draws (fingerprinter.unknown);
    # pypinyin reads the few that GB18030 once gave to characters Unicode lacked.
    for start, stop in _PRIVATE_USE_RANGES:
        block = table[start:stop]
        block[block == DROP] = UNKNOWN
    for start, stop in _NORMALIZED_RANGES:
        for codepoint in range(start, stop):
            if table[codepoint] != DROP:
                continue
            char = chr(codepoint)
            folded = unicodedata.normalize("NFKC", char)
            if len(folded) != 1 or folded == char:
                folded = unicodedata.normalize("NFKD", char)[:1]  # é → e
            if folded and folded != char:
                table[codepoint] = table[ord(folded)]
    table.setflags(write=False)
    return table


def common_letters_class() -> str:
    """A regular-expression character class of the commonest characters that make letters:
    ASCII letters and the CJK Unified Ideographs that have a reading (a few have none).

    A subset of what ``to_letters`` counts, so that a text with N of these holds at least
    N letters: interfaces state and check a minimum with it (the API's schema).
    """
    table = initial_table()
    lettered = np.flatnonzero(table[0x4E00:0xA000] != DROP) + 0x4E00
    # Runs of consecutive code points become ranges.
    breaks = np.flatnonzero(np.diff(lettered) != 1)
    starts = np.concatenate(([lettered[0]], lettered[breaks + 1]))
    ends = np.concatenate((lettered[breaks], [lettered[-1]]))
    ranges = "".join(
        f"\\u{a:04x}-\\u{b:04x}" if a != b else f"\\u{a:04x}"
        for a, b in zip(starts, ends, strict=True)
    )
    return f"[A-Za-z{ranges}]"


def code_points(text: str) -> np.ndarray:
    """The text's code points as uint32; lone surrogates pass through (and are dropped later)."""
    if not isinstance(text, str):
        raise TypeError(f"expected text as str, got {type(text).__name__}")
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _read_pinyin(text: str, points: np.ndarray, codes: np.ndarray) -> None:
    """Give words written in pinyin inside Chinese text the initials of their syllables
    (`pinyin_runs`), in place. Looked for only in texts with Chinese letters and a run of
    Latin ones not touching an ASCII character other than a space or an apostrophe
    (numpy passes): plain Chinese and English texts are unchanged, and most Chinese texts
    with Latin words (URLs, units, ``iPhone``) are left at that.
    """
    latin = codes < ALPHABET_LETTERS
    if not latin.any():
        return
    cjk = (codes - np.uint8(CJK_FLAG)) < ALPHABET_LETTERS  # uint8 arithmetic wraps
    if not cjk.any():
        return
    edges = np.flatnonzero(np.diff(latin.view(np.int8), prepend=0, append=0))
    starts, ends = edges[0::2], edges[1::2]
    # Pinyin is written in lowercase: a run with a capital or an accented letter is not.
    lower = ((points - np.uint32(ord("a"))) < 26) | ((points - np.uint32(0xFF41)) < 26)
    candidate = np.add.reduceat(lower, starts) == ends - starts
    closed = ((points - np.uint32(0x21)) < 0x5E) & (points != ord("'"))  # ! .. ~
    candidate &= (starts == 0) | ~closed[np.maximum(starts - 1, 0)]
    candidate &= (ends == len(points)) | ~closed[np.minimum(ends, len(points) - 1)]
    if not candidate.any():
        return
    ranges, initials = pinyin_runs(text, cjk)
    for start, end in ranges:
        codes[start:end] = DROP
    for at in initials:
        letter = unicodedata.normalize("NFKC", text[at])
        codes[at] = (ord(letter) - ord("a")) | CJK_FLAG


def to_letters(text: str, latin_mode: str = "letters") -> Letters:
    """Convert ``text`` to its letter stream (see the module docstring)."""
    points = code_points(text)
    codes = initial_table()[points]  # a copy: the table is shared
    _read_pinyin(text, points, codes)
    keep = codes != DROP
    if latin_mode == "initials":
        # A Latin letter counts only when it starts a word (the previous code point is
        # not a Latin letter); CJK letters are initials already.
        latin = keep & ((codes & CJK_FLAG) == 0)
        word_start = latin.copy()
        word_start[1:] &= ~latin[:-1]
        keep &= ~latin | word_start
    elif latin_mode != "letters":
        raise ValueError(f"latin_mode must be 'letters' or 'initials', not {latin_mode!r}")
    offsets = np.flatnonzero(keep)
    return Letters(codes=codes[offsets], offsets=offsets)
