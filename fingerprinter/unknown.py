"""Unknown letters: characters a page hides behind private-use code points.

A custom web font can draw any glyph for a code point of the Private Use Area, so a pirate
site replaces some of its Chinese characters by such code points: the reader sees the text,
a scraper gets code points with no reading. `initials.to_letters` gives each one the letter
``UNKNOWN`` (a "u" flagged as Chinese, which no pinyin syllable starts with), in its
place: it keeps the granule's length and its neighbours' positions, where dropping it would
shift every granule across it.

A granule holding unknown letters cannot have its master's letter counts, so a suspect's
granules that hold a few (up to ``MAX_UNKNOWN``) are queried with every way of reading them
(`completed_values`): each unknown as each letter a Chinese character can start with. The
true reading is among them, so the granule finds its master's fingerprint wherever the
master indexed one there. Such texts are queried at every offset, not only at their
anchors: an anchor is chosen by hashing letters, and unknown letters change the hashes.
A text makes at most ``MAX_COMPLETIONS`` such values (a long one completes granules with
one unknown letter only; one with more offsets than that is queried as any text).

The alignment reads each unknown letter as the master's letter on the diagonal of the
nearest run of matching k-grams (`fill_unknown`), so a copied passage is one span again;
before that, only the k-grams without an unknown letter can match (`known_kgram_share`).
"""

from __future__ import annotations

import numpy as np

from .initials import CJK_FLAG, UNKNOWN, Letters
from .params import ALPHABET_SIZE, FingerprintParams
from .quantize import level_table
from .reference import ReferenceFrame
from .sliding import sliding_values

#: Most unknown letters a queried granule may hold: readings grow as 23**w / w!.
MAX_UNKNOWN = 2
#: Most query values made by completing granules for one text; past it, granules with
#: fewer unknown letters only (46,000 values take ~30 ms in the embedded Valkey index).
MAX_COMPLETIONS = 150_000
# Letters a Chinese character's reading can start with (not i, u, v).
_READABLE = np.array([c for c in range(ALPHABET_SIZE) if chr(c + ord("a")) not in "iuv"])


def has_unknown(letters: Letters) -> bool:
    """Whether the text has an unknown letter (a private-use code point)."""
    return bool(np.any(letters.codes == UNKNOWN))


def known_kgram_share(letters: Letters, k: int) -> float:
    """Share of the text's k-grams that hold no unknown letter (1.0 without any)."""
    unknown = letters.codes == UNKNOWN
    if not unknown.any():
        return 1.0
    total = len(letters) - k + 1
    if total <= 0:
        return 1.0
    held = np.concatenate(([0], np.cumsum(unknown)))
    return float(np.count_nonzero(held[k : k + total] == held[:total])) / total


def _granule_counts(codes: np.ndarray, starts: np.ndarray, n: int) -> np.ndarray:
    """Per granule (rows) the count of each letter (columns), unknown letters left out."""
    cumulative = np.zeros((len(codes) + 1, ALPHABET_SIZE), dtype=np.int32)
    known = codes != UNKNOWN
    np.add.at(cumulative, (np.flatnonzero(known) + 1, codes[known] & ~np.uint8(CJK_FLAG)), 1)
    np.cumsum(cumulative, axis=0, out=cumulative)
    return cumulative[starts + n] - cumulative[starts]


def completed_values(
    letters: Letters, params: FingerprintParams, frame: ReferenceFrame
) -> tuple[np.ndarray, np.ndarray] | None:
    """Query values of a text with unknown letters: (values, granule start letters).

    Every granule at every offset gives its own value (unknown letters as they are: a copy
    of a text that has them, as the index has it) and, holding at most ``MAX_UNKNOWN``
    unknown letters, the values of every reading of them, within ``MAX_COMPLETIONS`` values
    for the text; None for a text with more offsets than that (queried as any other).
    """
    n = params.granule
    total = len(letters) - n + 1
    if total > MAX_COMPLETIONS:
        return None
    if total <= 0:
        return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64)
    codes = letters.codes
    unknown = np.concatenate(([0], np.cumsum(codes == UNKNOWN)))
    held = unknown[n : n + total] - unknown[:total]
    own = sliding_values(letters, params, frame)
    # Sums of table entries below 2**63: int64 throughout (uint64 with int64 makes float).
    values, firsts = [own.astype(np.int64)], [np.arange(total, dtype=np.int64)]
    most = MAX_UNKNOWN
    per_granule = [0, len(_READABLE), len(_READABLE) * (len(_READABLE) + 1) // 2]
    while most > 0:
        made = total + sum(int(np.count_nonzero(held == w)) * per_granule[w]
                           for w in range(1, most + 1))  # fmt: skip
        if made <= MAX_COMPLETIONS:
            break
        most -= 1
    starts = np.flatnonzero((held >= 1) & (held <= most))
    if not len(starts):
        return own, firsts[0]
    counts = _granule_counts(codes, starts, n)
    script = np.concatenate(([0], np.cumsum(letters.is_cjk)))
    cjk = 2 * (script[starts + n] - script[starts]) >= n
    table = level_table(params, frame).reshape(2, ALPHABET_SIZE, n + 1).astype(np.int64)
    rows = cjk.astype(np.int64)[:, None]  # the granule's frame
    letter = np.arange(ALPHABET_SIZE)[None, :]
    entries = table[rows, letter, counts]
    base = entries.sum(axis=1)
    # What one more of each letter adds (counts stay below n: the granule has unknowns).
    step = (table[rows, letter, np.minimum(counts + 1, n)] - entries)[:, _READABLE]
    one = held[starts] == 1
    if one.any():
        values.append((base[one, None] + step[one]).reshape(-1))
        firsts.append(np.repeat(starts[one], len(_READABLE)))
    two = held[starts] == 2
    if two.any():
        twice = table[rows[two], letter, np.minimum(counts[two] + 2, n)]
        double = (twice - entries[two])[:, _READABLE]
        a, b = np.triu_indices(len(_READABLE), k=1)
        pairs = base[two, None] + step[two][:, a] + step[two][:, b]
        same = base[two, None] + double
        values += [pairs.reshape(-1), same.reshape(-1)]
        firsts += [np.repeat(starts[two], len(a)), np.repeat(starts[two], len(_READABLE))]
    return np.concatenate(values).astype(np.uint64), np.concatenate(firsts)


def fill_unknown(
    master: np.ndarray, suspect: Letters, runs: np.ndarray, gap: int
) -> Letters | None:
    """The suspect with each unknown letter read as the master's letter on the diagonal of
    the nearest run of matching k-grams (``runs``: rows m0, m1, s0, s1, sorted by s0)
    within ``gap`` letters of it; None when there is none to read.

    A copy hides a character the master has in the same place relative to the copied
    letters around it; a text that copies nothing has no runs long enough around its
    unknown letters for a reading to make a difference.
    """
    where = np.flatnonzero(suspect.codes == UNKNOWN)
    if not len(where) or not len(runs):
        return None
    by_end = np.argsort(runs[:, 3], kind="stable")
    ends = runs[by_end, 3]
    before = np.searchsorted(ends, where, side="right") - 1  # last run ending at or before
    after = np.searchsorted(runs[:, 2], where, side="right")  # first run starting after
    before_gap = np.where(before >= 0, where - ends[np.maximum(before, 0)], gap + 1)
    after_at = np.minimum(after, len(runs) - 1)
    after_gap = np.where(after < len(runs), runs[after_at, 2] - where, gap + 1)
    use_before = before_gap <= after_gap
    row = np.where(use_before, by_end[np.maximum(before, 0)], after_at)
    near = np.minimum(before_gap, after_gap) <= gap
    diagonal = runs[row, 0] - runs[row, 2]
    at = where + diagonal
    ok = near & (at >= 0) & (at < len(master))
    if not ok.any():
        return None
    codes = suspect.codes.copy()
    codes[where[ok]] = master[at[ok]] | np.uint8(CJK_FLAG)
    return Letters(codes, suspect.offsets)
