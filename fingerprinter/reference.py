"""The reference frame: expected letter frequencies that a granule's counts are measured against.

Chinese pinyin initials and Latin letters have very different distributions, so the frame
keeps one frequency vector per script; a granule uses the frame of the script most of its
letters come from. ``fit_reference`` fits a frame on any texts; the default frame ships as
package data (``data/reference.json``, made by ``benchmarks/fit_reference.py`` on
``../shared/corpus``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import numpy as np

from .initials import to_letters
from .params import ALPHABET_SIZE

SCRIPTS = ("latin", "cjk")  # index 0 and 1, as in Letters.is_cjk


@dataclass(frozen=True)
class ReferenceFrame:
    """Expected frequency of each letter, per script (rows: latin, cjk; columns: a..z)."""

    id: str
    frequencies: tuple[tuple[float, ...], tuple[float, ...]]
    note: str = ""

    def as_array(self) -> np.ndarray:
        return np.asarray(self.frequencies, dtype=np.float64)

    def to_json(self) -> str:
        return json.dumps(
            {
                "id": self.id,
                "note": self.note,
                "frequencies": dict(zip(SCRIPTS, self.frequencies, strict=True)),
            },
            ensure_ascii=False,
            indent=1,
        )

    @classmethod
    def from_json(cls, data: str) -> ReferenceFrame:
        raw = json.loads(data)
        latin, cjk = (tuple(float(x) for x in raw["frequencies"][s]) for s in SCRIPTS)
        if any(len(row) != ALPHABET_SIZE for row in (latin, cjk)):
            raise ValueError(
                f"reference frame {raw.get('id')!r} needs {ALPHABET_SIZE} letters per script"
            )
        return cls(id=raw["id"], frequencies=(latin, cjk), note=raw.get("note", ""))


def fit_reference(
    texts: Iterable[str], frame_id: str = "custom", latin_mode: str = "letters", note: str = ""
) -> ReferenceFrame:
    """Fit a reference frame: the relative frequency of each letter, per script, over ``texts``."""
    counts = np.zeros((2, ALPHABET_SIZE), dtype=np.int64)
    for text in texts:
        letters = to_letters(text, latin_mode)
        script = letters.is_cjk.astype(np.int64)
        counts += np.bincount(
            script * ALPHABET_SIZE + letters.letters, minlength=2 * ALPHABET_SIZE
        ).reshape(2, ALPHABET_SIZE)
    totals = counts.sum(axis=1, keepdims=True)
    # A script never seen falls back to a uniform frame rather than dividing by zero.
    freqs = np.where(totals > 0, counts / np.maximum(totals, 1), 1.0 / ALPHABET_SIZE)
    latin, cjk = (tuple(round(float(x), 6) for x in row) for row in freqs)
    return ReferenceFrame(id=frame_id, frequencies=(latin, cjk), note=note)


@lru_cache(maxsize=8)
def load_reference(frame_id: str) -> ReferenceFrame:
    """The shipped reference frame with this id."""
    text = resources.files(__package__).joinpath("data", "reference.json").read_text("utf-8")
    frame = ReferenceFrame.from_json(text)
    if frame.id != frame_id:
        raise ValueError(
            f"unknown reference frame {frame_id!r}; the shipped one is {frame.id!r}"
            " (fit another with fingerprinter.fit_reference)"
        )
    return frame
