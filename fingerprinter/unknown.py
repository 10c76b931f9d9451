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
from .kgrams import kgram_codes
from .params import ALPHABET_SIZE, FingerprintParams
from .quantize import level_table
from .reference import ReferenceFrame
from .sliding import sliding_values
from .winnowing import HASH_BITS, kgram_hashes, sliding_min, winnow

#: Most unknown letters a queried granule may hold (`completed_values` reads one or two):
#: readings grow as 23**w / w!.
MAX_UNKNOWN = 2
#: Most query values made by completing granules for one text; past it, granules with
#: fewer unknown letters only. Each value is a key the lookup searches in every part of
#: the index: bench_scale's pages with a fifth of their characters hidden made up to
#: 93,000 at 150,000 (before `_Anchors`), and were the slowest lookups of a 100k-work
#: library (34 ms at p99 of 171 pages; 15 ms with up to 48,000 here).
MAX_COMPLETIONS = 80_000
# Letters a Chinese character's reading can start with (not i, u, v).
_READABLE = np.array([c for c in range(ALPHABET_SIZE) if chr(c + ord("a")) not in "iuv"])
#: Letters from a possible anchor whose granules are completed too (`_Anchors`): with 0,
#: `copytrack eval` lost a copy of a 120-letter news item with a fifth of its characters
#: hidden (seed 0), with 1 one with 30% (seed 3); with 2 it finds the copies every offset
#: found (seeds 0, 2 and 3), with 8% more values than 1.
NEAR_ANCHOR = 2
#: A k-gram hash no hash exceeds: an unknown one's placeholder.
_ANY_HASH = np.uint64((1 << HASH_BITS) - 1)


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


class _Anchors:
    """Where, and with which readings of its unknown letters, a granule of the text may hold
    the value of one a master indexes: a granule at a winnowing anchor of the master's
    letters, which agree with the text's except where the text's are unknown.

    A k-gram holding an unknown letter has an unknown hash. A start may be an anchor when
    its own k-gram has one, when it is one with every unknown hash taken as the largest (a
    true hash is no larger, so no anchor of any reading is lost), or within a window of
    either end (the master's letters beyond the text may make it one). Where its own k-gram
    holds the unknown letter, a reading is kept when it makes that k-gram's hash small
    enough to be a window's least. Granule values change slowly along a text, so a copy's
    granule near the master's anchor often has the anchor's value: the starts up to
    NEAR_ANCHOR letters from a possible anchor are completed too.
    """

    def __init__(self, letters: Letters, params: FingerprintParams) -> None:
        k, w = params.anchor_k, params.stride
        self.k, self.letters = k, letters.letters
        self.unknown = np.flatnonzero(letters.codes == UNKNOWN)
        self.codes = kgram_codes(letters.letters, k).astype(np.int64)
        count = len(self.codes)
        #: Starts whose granules are completed: a possible anchor or near one.
        self.completed = np.ones(len(letters), dtype=bool)
        #: Starts whose own k-gram holds an unknown letter, and not near a possible anchor
        #: whose own k-gram is known (those keep every reading).
        self.tested = np.zeros(len(letters), dtype=bool)
        #: The largest hash a tested start's own k-gram may have and still be the least of
        #: a window holding it.
        self.most = np.full(len(letters), _ANY_HASH, dtype=np.uint64)
        if params.anchoring != "content" or count < 2 * w:
            return
        held = np.concatenate(([0], np.cumsum(letters.codes == UNKNOWN)))
        hidden = np.zeros(len(letters), dtype=bool)
        hidden[:count] = held[k : k + count] > held[:count]
        hashes = kgram_hashes(self.codes)
        hashes[hidden[:count]] = _ANY_HASH
        known = np.ones(len(letters), dtype=bool)
        known[w : count - w] = False
        known[winnow(hashes, w)] = True
        known &= ~hidden
        self.completed = _near(known | hidden)
        self.tested = hidden & ~_near(known)
        # A hidden hash is a window's least when it is at most the least of the others: the
        # largest of the minima of the windows holding it (its own placeholder is the
        # largest, so it never is the minimum it is measured against).
        flipped = _ANY_HASH - sliding_min(hashes, w)
        self.most[w - 1 : count - w + 1] = _ANY_HASH - sliding_min(flipped, w)

    def readings_ok(self, starts: np.ndarray, places: int) -> np.ndarray:
        """For each start, whether each reading (``places`` 1: each of `_READABLE` for the
        first unknown letter at or after it; 2: each pair, the first's reading first) may
        make it an anchor."""
        shape = (len(starts),) + (len(_READABLE),) * places
        ok = np.ones(shape, dtype=bool)
        tested = np.flatnonzero(self.tested[starts])
        if not len(tested):
            return ok
        at = starts[tested]
        first = np.searchsorted(self.unknown, at)
        code = self.codes[at]
        for place in range(places):
            unknown = self.unknown[np.minimum(first + place, len(self.unknown) - 1)]
            inside = (unknown - at < self.k) & (first + place < len(self.unknown))
            power = np.clip(self.k - 1 - (unknown - at), 0, None)
            weight = np.where(inside, ALPHABET_SIZE**power, 0)
            change = _READABLE[None, :] - self.letters[unknown][:, None].astype(np.int64)
            code = code[..., None] + (weight[:, None] * change).reshape(
                (len(at),) + (1,) * place + (len(_READABLE),)
            )
        hashes = kgram_hashes(code)
        ok[tested] = hashes <= self.most[at].reshape((-1,) + (1,) * places)
        return ok


def _near(marked: np.ndarray) -> np.ndarray:
    """The marked positions and those up to NEAR_ANCHOR letters from one."""
    out = marked.copy()
    for shift in range(1, NEAR_ANCHOR + 1):
        out[shift:] |= marked[:-shift]
        out[:-shift] |= marked[shift:]
    return out


def completed_values(
    letters: Letters, params: FingerprintParams, frame: ReferenceFrame
) -> tuple[np.ndarray, np.ndarray] | None:
    """Query values of a text with unknown letters: (values, granule start letters).

    Every granule at every offset gives its own value (unknown letters as they are: a copy
    of a text that has them, as the index has it) and, holding at most ``MAX_UNKNOWN``
    unknown letters where a master may have an anchor (`_Anchors`), the values of every
    reading of them that may make it one, within ``MAX_COMPLETIONS`` values for the text;
    None for a text with more offsets than that (queried as any other).
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
    anchors = _Anchors(letters, params)
    held[~anchors.completed[:total]] = 0
    own = sliding_values(letters, params, frame)
    # Sums of table entries below 2**63: int64 throughout (uint64 with int64 makes float).
    values, firsts = [own.astype(np.int64)], [np.arange(total, dtype=np.int64)]
    one, two = np.flatnonzero(held == 1), np.flatnonzero(held == 2)
    ok_one = anchors.readings_ok(one, 1)
    # A pair of letters reads the two unknowns either way round; one letter twice, one way.
    a, b = np.triu_indices(len(_READABLE), k=1)
    both = anchors.readings_ok(two, 2)
    ok_pairs = both[:, a, b] | both[:, b, a]
    ok_same = both[:, np.arange(len(_READABLE)), np.arange(len(_READABLE))]
    if total + ok_one.sum() + ok_pairs.sum() + ok_same.sum() > MAX_COMPLETIONS:
        two = two[:0]
        if total + ok_one.sum() > MAX_COMPLETIONS:
            one = one[:0]
    starts = np.concatenate((one, two))
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
    ones = slice(0, len(one))
    if len(one):
        values.append((base[ones, None] + step[ones])[ok_one])
        firsts.append(np.broadcast_to(one[:, None], ok_one.shape)[ok_one])
    twos = slice(len(one), len(starts))
    if len(two):
        twice = table[rows[twos], letter, np.minimum(counts[twos] + 2, n)]
        double = (twice - entries[twos])[:, _READABLE]
        pairs = base[twos, None] + step[twos][:, a] + step[twos][:, b]
        same = base[twos, None] + double
        values += [pairs[ok_pairs], same[ok_same]]
        firsts += [np.broadcast_to(two[:, None], ok_pairs.shape)[ok_pairs],
                   np.broadcast_to(two[:, None], ok_same.shape)[ok_same]]  # fmt: skip
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
