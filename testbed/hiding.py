"""Attacks that hide characters from text matching (same ``attack(text, rng, **strength)``
signature as ``testbed.attacks``, registered there).

- ``private_use``: a share of the Chinese characters replaced by private-use code points
  (U+E000–U+F8FF) that a custom web font draws as the characters: the reader sees the
  text, a scraper gets code points with no reading. The font maps one code point to one
  character, so a character hidden twice on a page gets the same code point both times.
- ``pinyin_words``: a share of the Chinese words written in toneless pinyin (小说 →
  ``xiaoshuo``), as fiction pirates write banned or tracked words. Words are pypinyin's
  own segmentation (its phrase dictionary, deterministic), their pinyin that of the
  phrase.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

#: Private Use Area of the Basic Multilingual Plane, where web-font obfuscation puts glyphs.
PRIVATE_USE = (0xE000, 0xF8FF)
_CJK_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")


@lru_cache(maxsize=1)
def _free_points() -> tuple[int, ...]:
    """Private-use code points with no reading: pypinyin reads the few that GB18030 once
    gave to real characters (legacy-encoded text has them, a font would not need them)."""
    from fingerprinter.initials import UNKNOWN, initial_table

    low, high = PRIVATE_USE
    table = initial_table()
    return tuple(p for p in range(low, high + 1) if table[p] == UNKNOWN)


def private_use(text: str, rng: random.Random, rate: float = 0.2) -> str:
    """Replace a ``rate`` of the Chinese characters by private-use code points, one code
    point per distinct character (the font's glyph for it), drawn without repeats."""
    points = _free_points()
    glyph_of: dict[str, str] = {}
    taken: set[int] = set()

    def hide(match: re.Match[str]) -> str:
        ch = match.group()
        if rng.random() >= rate:
            return ch
        if ch not in glyph_of:
            point = rng.choice(points)
            while point in taken:
                point = rng.choice(points)
            taken.add(point)
            glyph_of[ch] = chr(point)
        return glyph_of[ch]

    return _CJK_CHAR.sub(hide, text)


@lru_cache(maxsize=1)
def _segmenter() -> Any:
    # Imported here: pypinyin's phrase tables take a fraction of a second to load.
    from pypinyin.seg.mmseg import seg

    return seg


def _toneless_pinyin(word: str) -> str:
    from pypinyin import Style, lazy_pinyin

    return "".join(lazy_pinyin(word, style=Style.NORMAL))


def pinyin_words(text: str, rng: random.Random, rate: float = 0.25) -> str:
    """Write a ``rate`` of the Chinese words in toneless pinyin, glued to the text around
    them (ü as ``v``, as pinyin input methods type it)."""
    segmenter = _segmenter()

    def respell(match: re.Match[str]) -> str:
        return "".join(
            _toneless_pinyin(word) if rng.random() < rate else word
            for word in segmenter.cut(match.group())
        )

    return _CJK_RUN.sub(respell, text)


HIDING_ATTACKS: dict[str, Callable[..., str]] = {
    "private_use": private_use,
    "pinyin_words": pinyin_words,
}
