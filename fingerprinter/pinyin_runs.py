"""Words written in pinyin inside Chinese text, read back as the initials of their syllables.

Pirates of fiction write banned or tracked words in toneless pinyin (小说 → ``xiaoshuo``);
letter by letter they would be eight Latin letters where the work has two initials. A run
of lowercase Latin letters counts as pinyin when

- it parses wholly into pinyin syllables (those of pypinyin's own per-character readings,
  with ü as ``v`` or ``u``), fewest syllables first, a longer first syllable on ties
  (``xian`` is one syllable, ``fangan`` is fang an);
- it sits inside Chinese text: the nearest character on either side (spaces aside) is a
  Chinese character, Chinese punctuation or the start or end of a line, and one of them is
  a Chinese character (both, for a run of one syllable: what is left of an English word
  cut by a stray mark). A run next to a digit, an ASCII mark or another Latin letter (a
  URL, ``iPhone``, an English sentence) stays Latin letters, and so does a word with
  capitals (brands, names, acronyms are written so).

Several such runs separated by spaces or apostrophes (``xiao shuo``, ``xi'an``) count
together: each must parse. Each syllable gives its first letter, flagged as a Chinese one,
at the offset of the syllable's first character.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

import numpy as np

# Lowercase ASCII letters, and their full-width forms (which NFKC folds to them).
_LOWER = "a-z\uff41-\uff5a"
_SEPARATORS = " '\u2019\u3000"
_GROUP = re.compile(f"[{_LOWER}]+(?:[{_SEPARATORS}]+[{_LOWER}]+)*")
_PIECE = re.compile(f"[{_LOWER}]+")
_SPACE = " \t\u3000"
_LONGEST = 6  # zhuang, shuang, chuang
_VOWELS = frozenset("aeiouv")


def _toneless(reading: str) -> str:
    plain = unicodedata.normalize("NFKD", reading).replace("u\u0308", "v")  # ü, as typed
    return "".join(c for c in plain if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def syllables() -> frozenset[str]:
    """Toneless pinyin syllables of pypinyin's character readings (interjections without
    a vowel, such as ``m``, ``ng``, ``hm``, left out), ü written ``v`` or ``u``."""
    from .initials import pinyin_readings

    # ~1,500 distinct readings among the 42,000 characters' ones: each made toneless once.
    readings = set(",".join(pinyin_readings().values()).split(","))
    found = set()
    for syllable in map(_toneless, readings):
        if syllable.isascii() and syllable.isalpha() and _VOWELS & set(syllable):
            found.add(syllable)
            found.add(syllable.replace("v", "u"))
    return frozenset(found)


def parse(word: str) -> list[int] | None:
    """Start offsets of the syllables ``word`` (lowercase ASCII) parses into, or None."""
    table = syllables()
    n = len(word)
    # fewest[i]: fewest syllables spelling word[i:], and the length of the first one.
    fewest: list[tuple[int, int] | None] = [None] * (n + 1)
    fewest[n] = (0, 0)
    for i in range(n - 1, -1, -1):
        best = None
        for size in range(min(_LONGEST, n - i), 0, -1):
            rest = fewest[i + size]
            usable = rest is not None and word[i : i + size] in table
            if usable and rest is not None and (best is None or rest[0] + 1 < best[0]):
                best = (rest[0] + 1, size)
        fewest[i] = best
    if fewest[0] is None:
        return None
    starts, i = [], 0
    while i < n:
        starts.append(i)
        step = fewest[i]
        assert step is not None
        i += step[1]
    return starts


def _context(ch: str, cjk_letter: bool) -> int:
    """2 for a Chinese character, 1 for Chinese punctuation or a line end, 0 otherwise."""
    if cjk_letter:
        return 2
    if ch in "\n\r" or "\u3000" <= ch <= "\u303f" or "\uff01" <= ch <= "\uff0f":
        return 1
    if "\uff1a" <= ch <= "\uff20" or ch in "“”‘’…—·《》「」『』【】":
        return 1
    return 0


def _neighbour(text: str, at: int, step: int, cjk: np.ndarray) -> int:
    while 0 <= at < len(text) and text[at] in _SPACE:
        at += step
    if not 0 <= at < len(text):
        return 1
    return _context(text[at], bool(cjk[at]))


def pinyin_runs(text: str, cjk: np.ndarray) -> tuple[list[tuple[int, int]], list[int]]:
    """Runs of pinyin in ``text`` (see the module docstring): the character ranges they
    take, and the offsets of their syllables' first letters (which become initials; the
    rest of a range gives no letter). ``cjk[i]`` says whether character ``i`` is a Chinese
    one with a letter."""
    ranges: list[tuple[int, int]] = []
    initials: list[int] = []
    for group in _GROUP.finditer(text):
        left = _neighbour(text, group.start() - 1, -1, cjk)
        right = _neighbour(text, group.end(), 1, cjk)
        if not (left and right and max(left, right) == 2):
            continue
        found = []
        for piece in _PIECE.finditer(group.group()):
            starts = parse(unicodedata.normalize("NFKC", piece.group()))
            if starts is None:
                break
            found += [group.start() + piece.start() + s for s in starts]
        else:
            # One syllable may be what is left of an English word cut by a stray mark
            # ("sa！lly"): it needs Chinese characters on both sides.
            if len(found) > 1 or min(left, right) == 2:
                ranges.append((group.start(), group.end()))
                initials += found
    return ranges, initials
