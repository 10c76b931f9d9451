"""Which masters does a text copy? Granule hits from the index, then passage alignment.

1. ``query_fingerprints`` of the text (a granule at every offset);
2. one round trip to Redis: the postings of those fingerprints, without those that more
   masters share than ``MatchSettings.df_cut`` allows (a share of the library); a master
   hit only through fingerprints that other masters share too is no candidate
   (boilerplate such as site footers cannot match on its own — content-anchored granules
   give a shared passage the same fingerprints everywhere);
3. every master with at least ``min_hits`` hits, ``min_exact_hits`` of them on granules
   with the very letters of the page's (not only their counts: a chance collision of
   fingerprints has none), and, when it has only a few, two of them as far apart in the
   work as in the page (``ordered_hits_below``: each posting says where in the work its
   granule lies), best first (no cap: a page that copies 120 chapters reports 120
   matches);
4. the second round, ``fingerprinter.align``, on the part of the suspect around the
   candidate's hits (and of a master hit only a few times, on the part its hits' places
   name): short passages where most hits are shared with other masters are
   boilerplate and dropped (a long one, or one that makes up most of the master, is content
   of near-duplicate masters: a copy of it copies each); a candidate is reported when the
   matched passages hold at least ``min_matched_letters`` letters in exactly matching
   k-grams (``Alignment.exact_weight``: Latin letters weighted by
   ``FingerprintParams.latin_weight``) or, for masters too short to hold that many, cover
   ``whole_master_coverage`` of the master; and cover at least ``min_coverage`` of the
   master or of the suspect;
5. with the synonym stream on, a text has a second letter stream (`fingerprinter.skeleton`:
   a Chinese text's common words one letter each, its names and numbers kept;
   `fingerprinter.english`: English function words), looked up in the same round trip;
   its candidates that step 4 did not match are aligned again in that stream, from one hit
   on (a rewrite that swaps most words for synonyms, 洗稿, leaves few granules whole;
   docs/accuracy.md, "Rewrites"), and those of many hits it does not match in the pinyin
   stream too, judged as rewrites;
6. what copies nothing is no match: a match confined to the work's heading (its title, or
   its first line: what a list of headlines or a "related articles" block shows of it;
   ``heading_chars``), and the quotation-sized matches of a text that has
   ``listing_works`` of them or more (a listing page, a search result, a tag page: short
   stretches of many works, each a link to the work, none a copy of it).
"""

from __future__ import annotations

import math
import threading
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from difflib import SequenceMatcher
from itertools import combinations
from typing import Any

import numpy as np

# np.unique imports numpy.ma on its first call (~20 ms): paid here, not on a worker's first
# page that aligns a master hit only a few times.
import numpy.ma

from fingerprinter import (
    FingerprintArray,
    FingerprintParams,
    KgramIndex,
    Letters,
    Skeleton,
    Span,
    align_letters,
    kept_numbers,
    kept_share,
    kgram_codes,
    known_kgram_share,
    query_granule_fingerprints,
    rewrite_letters,
    rewrite_stream,
    synonym_query,
    to_letters,
)

from ..context import Context
from ..core.sized_lru import SizedLRU
from ..index import PLACE_LETTERS, PLACES, Postings
from ..masters.library import library_size
from ..masters.master_cache import cached_masters

# Letters of the suspect aligned beyond the first and last hit of a candidate: a copied
# stretch with no hit is shorter than the guaranteed span, so this is ample.
WINDOW_SLACK_LETTERS = 2000
# ... around the hits of a master hit only a few times (MatchSettings.ordered_hits_below),
# beyond their extent, in the text and in the parts of the master their places name: so few
# hits leave a copied passage no longer than a few hundred letters (the longest of the
# scale benchmark's such matches: 190 characters).
FEW_HITS_SLACK_LETTERS = 600
# ... and around the one hit of a master hit once: a copied stretch longer than this
# would hold a second indexed granule. The master is aligned on as many characters around
# the hit's, found by the middle _PROBE_CHARS of them.
EXCERPT_SLACK_LETTERS = 200
EXCERPT_SLACK_CHARS = 400
_PROBE_CHARS = 8
# How far, in places of PLACE_LETTERS letters, two hits' distance in the work may be from
# their distance in the text (MatchSettings.ordered_hits_below): a place rounds down, and
# edits between the hits move them a little.
ORDER_SLACK_PLACES = 2
# Letters on either side of a hit's granule where a copy's letters are looked for before
# the whole alignment (MatchSettings.min_kgrams_near_hits).
NEAR_HIT_LETTERS = 20
# Letter streams and sorted k-grams of recently matched masters kept per process (a worker
# keeps matching the same popular works), about 21 bytes per letter: 512 MB hold ~8,000
# news articles, or 50 novels (a bound of 2,000 masters let a library of novels take
# gigabytes; at 100,000 works 512 MB also keeps more than it did: check 10.3 -> 8.5-9.0 s
# of CPU).
_MASTER_LETTERS_BYTES = 512 * 2**20
#: A match copying fewer characters of the work is quotation-sized: kept, but out of the
#: reviewer's queue (`tracker.findings.queries` filter ``size``).
QUOTATION_CHARS = 200
# Characters an aligned passage may reach past the heading it copies (the alignment
# extends over a punctuation mark or two).
_HEADING_SLACK_CHARS = 4


@dataclass(frozen=True)
class _Stream:
    """A letter stream the texts are fingerprinted and aligned in: the pinyin one, or the
    synonym one (`fingerprinter.synonyms`), searched for the works the first does not match."""

    name: str
    letters: Callable[[str, FingerprintParams], Letters]


_PINYIN = _Stream("pinyin", lambda text, params: to_letters(text, params.latin_mode))
_SYNONYMS = _Stream("synonyms", rewrite_letters)


@dataclass(frozen=True)
class MatchSettings:
    """Thresholds of the matcher (defaults chosen by measurement, see docs/accuracy.md)."""

    min_hits: int = 2
    # A master hit once only is aligned too, but reported only as a short excerpt (below):
    # one granule is all a quotation-sized copy may hold. Not when the hit is in Latin
    # script: min_excerpt_latin_chars copied letters hold several granules.
    min_excerpt_hits: int = 1
    max_candidates: int | None = None
    # A fingerprint in more masters than max_df, or than max_df_share of the library once
    # that is more, is ignored: one in 20 of 1,000 works is boilerplate, one in 20 of a
    # million may be a story syndicated twenty times. The share equals 20 at 100,000
    # works, the largest library measured (benchmarks/results/scale.md).
    max_df: int = 20
    max_df_share: float = 0.0002
    min_shared_hits: int = 12
    # The same for candidates of the skeleton stream (`fingerprinter.skeleton`).
    skeleton_min_shared_hits: int = 1
    # A candidate needs this many hits whose granule has the master's very letters in its
    # middle, not only their counts (`Postings.exact`; a check of 6 bits: a chance
    # collision passes once in 64), unless it has exact_unneeded_hits hits (a copy edited
    # every few characters keeps its fingerprints more often than its letters). At 100,000
    # works three candidates in four are fingerprints colliding by chance, one or two, none
    # exact; they are neither read from MongoDB nor aligned.
    min_exact_hits: int = 1
    exact_unneeded_hits: int = 3
    # ... and in the skeleton stream, where a rewrite that splits or merges a word shifts
    # the class letters in a granule's middle while their counts (the fingerprint) stay:
    # two hits in order (ordered_hits_below) need no exact one, the rewrite gates below
    # judge the match.
    skeleton_exact_unneeded_hits: int = 2
    # A master hit twice or more is aligned whole only when this many of the text's
    # k-grams (align_k letters) within NEAR_HIT_LETTERS of its hits occur in it: a copy
    # has its letters where its fingerprints hit, frequency fingerprints that collide by
    # chance (common phrases, text generated from the same corpus) do not. At 100,000
    # works this skips half the alignments that found nothing (1,714 of 3,519); no match
    # of the scale benchmark had fewer than 20.
    min_kgrams_near_hits: int = 10
    # A master hit min_hits times but fewer than this is aligned only when two of its hits
    # lie in it about as far apart as in the text (within ORDER_SLACK_PLACES places of the
    # index, `tracker.index.places_of`): the hits of a copied stretch keep their distance,
    # fingerprints that collide by chance fall anywhere in a long work. Decided from the
    # postings, before the work is read. At 100,000 works this drops 844 of the 1,607 two-
    # and three-hit alignments of the scale benchmark that found nothing, and none of its 17
    # matches with so few hits (their hits lie within 19 letters of their text's distance).
    # Such a work is aligned only on the part of it where its hits' places put the copy
    # (FEW_HITS_SLACK_LETTERS around them): the same matches, in half the time.
    ordered_hits_below: int = 4
    min_matched_letters: int = 100
    # A shorter copy (a quotation-sized excerpt of a news brief) is reported when one of
    # its passages holds a stretch copied character for character — letters and digits,
    # punctuation and spacing aside — of this many Chinese characters, or this many Latin
    # letters and digits (~15 English words): names and stock phrases are shorter
    # (docs/accuracy.md, "Short excerpts").
    min_excerpt_chars: int = 24
    min_excerpt_latin_chars: int = 80
    min_coverage: float = 0.05
    whole_master_coverage: float = 0.8
    boilerplate_max_chars: int = 150
    boilerplate_max_share: float = 0.5
    # A match whose passages all lie in the work's heading (its title where the text has it,
    # its first line) copies nothing: a headline in a list links to the work. At most this
    # many characters are the first line, and only of a work at least twice as long.
    heading_chars: int = 160
    # A text with quotation-sized matches of this many works is a listing (headlines and
    # first lines, search snippets): those matches are dropped, copies kept.
    listing_works: int = 3
    # A match in the rewrite stream (the text's skeleton, `fingerprinter.skeleton`) needs
    # this share of its page passages' characters in runs of two or more that the work's
    # passages have in the same order (`fingerprinter.kept_share`): a rewrite keeps the
    # words it did not swap, skeletons that align by chance share scattered characters.
    min_rewrite_kept: float = 0.3
    # ... or this share when the match covers rewrite_whole_coverage of the work or of the
    # page (a rewrite of all of it): a skeleton aligned whole by chance keeps scattered
    # characters only.
    min_rewrite_kept_whole: float = 0.15
    rewrite_whole_coverage: float = 0.8
    # The same for a candidate of one hit, weaker evidence: seed 0 of the eval, rewrites
    # found from one hit keep 0.42 and up, chance alignments from one 0.24 at most.
    min_rewrite_kept_one_hit: float = 0.4
    # ... and this share of its page passages' numbers in the work's passages
    # (`fingerprinter.kept_numbers`): seed 0 and 5 of the eval, rewrites keep 0.89 and up,
    # texts of the work's template (hard negatives) 0.67 at most.
    min_rewrite_numbers: float = 0.8
    # A skeleton candidate of this many hits that its skeleton does not match is aligned in
    # the pinyin stream too, judged by the gates above (None: never). A novel's skeleton
    # holds few own letters, and its runs of class letters align only near them; the
    # stretches a rewrite left whole are the pinyin stream's, too broken for its granules.
    # Eval seed 5: a novel chapter rewritten at 50% found from 6 hits (7% of it aligned).
    rewrite_pinyin_hits: int | None = 4

    def df_cut(self, library_size: int) -> int:
        """Fingerprints listed by more masters than this are ignored (see max_df)."""
        return max(self.max_df, math.ceil(self.max_df_share * library_size))


DEFAULT_MATCH_SETTINGS = MatchSettings()

#: Fetches masters (``external_id``, ``text``, ``title``) by integer id: from MongoDB through
#: the context's cache by default; evaluation sweeps pass one that reads masters kept in
#: memory.
MasterLoader = Callable[[Context, Iterable[int]], dict[int, dict[str, Any]]]


@dataclass(frozen=True)
class MasterRef:
    """The master a match points at."""

    id: int
    external_id: str
    title: str | None


@dataclass(frozen=True)
class Match:
    """A master that the suspect copies, with the evidence."""

    master: MasterRef
    score: float
    hits: int
    master_coverage: float
    suspect_coverage: float
    spans: tuple[Span, ...]
    #: Characters of the work inside the matched passages: how much was copied, so that a
    #: quotation-sized excerpt is told from a copy.
    copied_chars: int = 0

    @property
    def quotation(self) -> bool:
        """Quotation-sized: fewer than QUOTATION_CHARS characters of the work copied."""
        return self.copied_chars < QUOTATION_CHARS


@dataclass(frozen=True)
class Candidate:
    """A master hit by the suspect's fingerprints, with where the hits are in the suspect:
    parallel arrays of character offsets, and whether other masters have that fingerprint
    too (shared)."""

    master_id: int
    hits: int
    starts: np.ndarray
    ends: np.ndarray
    shared: np.ndarray
    #: Where in the master each hit's granule lies (`tracker.index.places_of`; 0: unknown).
    places: np.ndarray

    def is_boilerplate(self, span: Span, master_chars: int, settings: MatchSettings) -> bool:
        """More of the hits inside this passage are shared with other masters than not, and
        it is short: under ``boilerplate_max_chars`` characters and under
        ``boilerplate_max_share`` of the master's ``master_chars`` (a footer, a disclaimer).
        A longer shared passage is content that near-duplicate masters have in common."""
        length = span.master_end - span.master_start
        if length >= min(
            settings.boilerplate_max_chars, settings.boilerplate_max_share * master_chars
        ):
            return False
        inside = (span.suspect_start <= self.starts) & (self.ends <= span.suspect_end)
        shared = int(np.count_nonzero(self.shared[inside]))
        return shared > int(np.count_nonzero(inside)) - shared

    def is_own(self, span: Span) -> bool:
        """A fingerprint inside this passage is this master's alone: text no other work
        has, not a phrase or footer that several share."""
        inside = (span.suspect_start <= self.starts) & (self.ends <= span.suspect_end)
        return bool(np.count_nonzero(inside & ~self.shared))


def candidates(
    ctx: Context, text: str, settings: MatchSettings = DEFAULT_MATCH_SETTINGS
) -> list[Candidate]:
    """The masters worth aligning, most hits first, ties by id.

    A fingerprint in more masters than ``df_cut`` of the library is ignored; one in several
    masters (shared) counts as a hit but cannot make a candidate on its own unless there
    are ``min_shared_hits`` of them: text that masters share is usually boilerplate.
    """
    letters = to_letters(text, ctx.params.latin_mode)
    return _candidates_of(ctx, [text], [letters], [None], settings)[0][0]


def _candidates_of(
    ctx: Context,
    texts: Sequence[str],
    letters: Sequence[Letters],
    synonyms: Sequence[Letters | None],
    settings: MatchSettings,
) -> list[tuple[list[Candidate], list[Candidate]]]:
    """`candidates` of each text (whose letters are given) in its pinyin stream and in its
    synonym stream (none without one), all index lookups in one round trip."""
    empty = query_granule_fingerprints(Letters(np.empty(0, np.uint8), np.empty(0, np.int64)),
                                       ctx.params)  # fmt: skip
    queries = [query_granule_fingerprints(of_text, ctx.params) for of_text in letters]
    queries += [empty if of_text is None else synonym_query(of_text, ctx.params)
                for of_text in synonyms]  # fmt: skip
    bounds = np.cumsum([0, *(len(query) for query in queries)])
    if bounds[-1] == 0:
        return [([], []) for _ in texts]
    values = np.concatenate([query.tagged() for query in queries])
    found = ctx.index.postings(values, settings.df_cut(library_size(ctx)))
    # Postings come in query order: each query's are one slice.
    cuts = np.searchsorted(found.query, bounds)
    # Skeleton granules are shared by works as a matter of course (中国 and 北京 are
    # proper nouns of every other article), and their middles shift in a rewrite: the
    # kept-in-order gate judges their matches.
    skeleton = replace(
        settings,
        min_shared_hits=settings.skeleton_min_shared_hits,
        exact_unneeded_hits=settings.skeleton_exact_unneeded_hits,
    )
    of_stream = [settings] * len(texts) + [skeleton if isinstance(of_text, Skeleton) else
                                           settings for of_text in synonyms]  # fmt: skip
    ranked = [
        _ranked(text, query, found, slice(cuts[n], cuts[n + 1]), int(bounds[n]), of_stream[n])
        if len(query) else []
        for n, (text, query) in enumerate(zip([*texts, *texts], queries, strict=True))
    ]  # fmt: skip
    return list(zip(ranked[: len(texts)], ranked[len(texts) :], strict=True))


def _ranked(
    text: str,
    query: FingerprintArray,
    found: Postings,
    rows: slice,
    first_query: int,
    settings: MatchSettings,
) -> list[Candidate]:
    """The candidates of one text from its postings (found[rows], whose query positions
    start at first_query)."""
    if rows.start == rows.stop:
        return []
    # Group the postings by master: one stable sort, then runs of equal ids.
    order = np.argsort(found.master[rows], kind="stable")
    master = found.master[rows][order]
    position = found.query[rows][order] - first_query
    shared = found.df[rows][order] > 1
    # Runs of one id in the sorted ids (np.unique would sort them again: twice as slow).
    starts_run = np.ones(len(master), dtype=bool)
    np.not_equal(master[1:], master[:-1], out=starts_run[1:])
    first = np.flatnonzero(starts_run)
    ids, hits = master[first], np.diff(first, append=len(master))
    distinctive = np.add.reduceat(~shared, first)
    exact = np.add.reduceat(found.exact[rows][order], first)
    fewest = min(settings.min_hits, settings.min_excerpt_hits)
    keep = (hits >= fewest) & ((distinctive > 0) | (hits >= settings.min_shared_hits))
    keep &= (exact >= settings.min_exact_hits) | (hits >= settings.exact_unneeded_hits)
    ranked = sorted(np.flatnonzero(keep).tolist(), key=lambda i: (-hits[i], ids[i]))
    starts, ends = query.starts[position], query.ends[position]
    letters, places = query.first_letters[position], found.place[rows][order]
    out: list[Candidate] = []
    for i in ranked:
        if settings.max_candidates is not None and len(out) >= settings.max_candidates:
            break
        run = slice(first[i], first[i] + hits[i])
        if hits[i] < settings.min_hits and _in_latin(text[starts[run][0] : ends[run][0]]):
            # A stretch of min_excerpt_latin_chars copied letters holds several indexed
            # granules (one in every `stride` offsets): one hit in Latin script is chance.
            continue
        if settings.min_hits <= hits[i] < settings.ordered_hits_below and not _hits_in_order(
            letters[run], places[run]
        ):
            continue
        out.append(Candidate(int(ids[i]), int(hits[i]), starts[run], ends[run], shared[run],
                             places[run]))  # fmt: skip
    return out


def _hits_in_order(letters: np.ndarray, places: np.ndarray) -> bool:
    """Whether two hits, at these first letters of the text and these places in the master,
    lie as far apart in both (within ORDER_SLACK_PLACES); yes when a place is unknown."""
    # Two or three hits: plain Python (numpy's calls cost more than the arithmetic).
    at, where = letters.tolist(), places.tolist()
    if not all(where):
        return True
    for first, second in combinations(range(len(at)), 2):
        in_text = (at[second] - at[first]) / PLACE_LETTERS
        in_master = where[second] - where[first]
        # Places wrap around every PLACES: compare the difference modulo PLACES.
        if abs((in_master - in_text + PLACES / 2) % PLACES - PLACES / 2) <= ORDER_SLACK_PLACES:
            return True
    return False


def _in_latin(text: str) -> bool:
    """Whether most letters of ``text`` (digits aside) are Latin ones."""
    letters = [c for c in _alnum(text) if not c.isdigit()]
    return sum(c.isascii() for c in letters) * 2 > len(letters)


def _is_excerpt(
    master: str, suspect: str, span: Span, longest_exact: float, settings: MatchSettings
) -> bool:
    """Whether a passage copies a stretch of ``min_excerpt_chars`` Chinese characters (or
    ``min_excerpt_latin_chars`` Latin letters and digits) character for character. Its
    letters matching exactly (``longest_exact``, pinyin initials) are a cheap test first;
    the characters decide: homophones, and templates whose numbers differ, match in
    letters, not in characters. Only passages of a candidate not reported otherwise get
    here, so they are short."""
    # Letters drop digits and Latin words count half: a stretch of characters is longer.
    if longest_exact < min(settings.min_excerpt_chars, settings.min_excerpt_latin_chars) / 2:
        return False
    copied = _alnum(master[span.master_start : span.master_end])
    page = _alnum(suspect[span.suspect_start : span.suspect_end])
    stretch = SequenceMatcher(None, copied, page, autojunk=False).find_longest_match()
    words = copied[stretch.a : stretch.a + stretch.size]
    latin = sum(c.isascii() for c in words)
    needed = (
        settings.min_excerpt_latin_chars if latin * 2 > len(words) else settings.min_excerpt_chars
    )
    return stretch.size >= needed


def _copied_mask(text: str, matches: Iterable[Match]) -> np.ndarray:
    """Which characters of ``text`` the spans of ``matches`` copy."""
    copied = np.zeros(len(text), dtype=bool)
    for match in matches:
        for span in match.spans:
            copied[span.suspect_start : span.suspect_end] = True
    return copied


def _explained(match: Match, copied: np.ndarray | None) -> bool:
    """Whether most of the page text of ``match`` is in ``copied`` (a mask of the page;
    None: nothing is)."""
    if copied is None or not copied.any():
        return False
    inside = sum(int(copied[s.suspect_start : s.suspect_end].sum()) for s in match.spans)
    total = sum(s.suspect_end - s.suspect_start for s in match.spans)
    return inside * 2 > total


def _copied_chars(spans: Iterable[Span]) -> int:
    """Characters of the master covered by ``spans`` (overlaps counted once)."""
    total, reached = 0, 0
    for start, end in sorted((s.master_start, s.master_end) for s in spans):
        total += max(0, end - max(start, reached))
        reached = max(reached, end)
    return total


def _alnum(text: str) -> str:
    """Letters and digits only, compatibility forms folded (full-width digits, case)."""
    return "".join(filter(str.isalnum, unicodedata.normalize("NFKC", text).casefold()))


@dataclass(frozen=True)
class _Suspect:
    """The suspect's letters and their k-grams (`kgram_codes` for ``k``), made once for all
    its candidates."""

    letters: Letters
    kgrams: np.ndarray
    k: int
    # Share of its k-grams with no unknown letter (a private-use code point): only those
    # can be found in a master before the alignment reads the unknown ones.
    known_share: float = 1.0

    @classmethod
    def of(cls, letters: Letters, params: FingerprintParams) -> _Suspect:
        k = params.align_k
        return cls(letters, kgram_codes(letters.letters, k), k, known_kgram_share(letters, k))

    def min_kgrams(self, settings: MatchSettings) -> int:
        """``min_kgrams_near_hits`` for this text: as many of its k-grams as can match."""
        return math.ceil(settings.min_kgrams_near_hits * self.known_share)

    def part(self, first: int, last: int) -> tuple[Letters, np.ndarray]:
        """Letters first..last (clipped to the text), and the k-grams wholly inside them."""
        first, last = max(first, 0), min(last, len(self.letters))
        part = Letters(self.letters.codes[first:last], self.letters.offsets[first:last])
        return part, self.kgrams[first : max(first, last - self.k + 1)]


def _window(suspect: _Suspect, candidate: Candidate, slack: int) -> tuple[Letters, np.ndarray]:
    """The suspect's letters, and their k-grams, from ``slack`` letters before the
    candidate's first hit to as many after its last."""
    offsets = suspect.letters.offsets
    first = np.searchsorted(offsets, candidate.starts.min()) - slack
    last = np.searchsorted(offsets, candidate.ends.max()) + slack
    return suspect.part(int(first), int(last))


def _letters_bytes(found: tuple[Letters, KgramIndex]) -> int:
    letters, kgrams = found
    arrays = (letters.codes, letters.offsets, kgrams.codes, kgrams.order)
    return sum(array.nbytes for array in arrays)


_letters_cache: SizedLRU[tuple[int, str], tuple[Letters, KgramIndex]] = SizedLRU(
    _MASTER_LETTERS_BYTES, _letters_bytes
)
_letters_lock = threading.Lock()  # threads of one process match at once (check --jsonl)


def _master_letters(
    master: dict[str, Any], params: FingerprintParams, stream: _Stream = _PINYIN
) -> tuple[Letters, KgramIndex]:
    """The master's letter stream and its sorted k-grams, from a per-process cache keyed by
    id and text hash (masters loaded without their hash are not cached)."""
    found = _kept_letters(master, params, stream)
    if found is not None:
        return found
    letters = stream.letters(master["text"], params)
    found = letters, KgramIndex.of(letters.letters, params.align_k)
    if master.get("sha256"):
        with _letters_lock:
            _letters_cache.put(_letters_key(master, params, stream), found)
    return found


def _letters_of(master: dict[str, Any], params: FingerprintParams, stream: _Stream) -> Letters:
    """The master's letter stream: as `_master_letters` keeps it, or made now (not kept:
    a master hit only a few times is seldom met again; but a synonym stream, whose
    segmentation costs a hundred times its pinyin one, is)."""
    if stream is not _PINYIN:
        return _master_letters(master, params, stream)[0]
    found = _kept_letters(master, params, stream)
    return found[0] if found is not None else stream.letters(master["text"], params)


def _kept_letters(
    master: dict[str, Any], params: FingerprintParams, stream: _Stream
) -> tuple[Letters, KgramIndex] | None:
    if not master.get("sha256"):
        return None
    with _letters_lock:
        return _letters_cache.get(_letters_key(master, params, stream))


def _letters_key(
    master: dict[str, Any], params: FingerprintParams, stream: _Stream
) -> tuple[int, str]:
    return master["_id"], f"{master['sha256']}:{params.latin_mode}:{params.align_k}:{stream.name}"


def _part_at_places(
    master: dict[str, Any],
    candidate: Candidate,
    suspect: _Suspect,
    first: np.ndarray,
    last: np.ndarray,
    params: FingerprintParams,
    min_kgrams: int,
    stream: _Stream,
) -> tuple[Letters, KgramIndex, float] | None:
    """The part of a master hit only a few times where its hits' places put the copy, with
    its sorted k-grams and its share of the master's letters; None when no such part holds
    ``min_kgrams`` of the text's k-grams within [first, last) (letters near the hits).

    A place names PLACE_LETTERS letters in every cycle of PLACES places: each is widened by
    the hits' extent in the text and FEW_HITS_SLACK_LETTERS on either side, overlapping
    ranges merged; the part runs from the first range holding the k-grams to the last.
    """
    letters = _letters_of(master, params, stream)
    hits = first + NEAR_HIT_LETTERS  # the hits' first letters in the text
    reach = int(hits.max() - hits.min()) + params.granule + FEW_HITS_SLACK_LETTERS
    cycles = np.arange(0, len(letters), PLACES * PLACE_LETTERS)
    starts = np.unique((candidate.places.astype(np.int64)[:, None] - 1) * PLACE_LETTERS + cycles)
    starts = starts[starts < len(letters)]
    if not len(starts):  # places of another text than this one
        return None
    # Ranges of one width around sorted starts: merged where one reaches the next.
    lows = np.maximum(starts - reach, 0)
    highs = np.minimum(starts + PLACE_LETTERS + reach, len(letters))
    apart = np.flatnonzero(lows[1:] > highs[:-1])
    firsts = np.concatenate(([0], apart + 1))
    lasts = np.concatenate((apart, [len(starts) - 1]))
    ranges = zip(lows[firsts].tolist(), highs[lasts].tolist(), strict=True)
    held = []
    for low, high in ranges:
        kgrams = KgramIndex.of(letters.letters[low:high], params.align_k)
        if kgrams.shared_within(suspect.kgrams, first, last) >= min_kgrams:
            held.append((low, high, kgrams))
    if not held:
        return None
    low, high = held[0][0], held[-1][1]
    part = Letters(letters.codes[low:high], letters.offsets[low:high])
    kgrams = held[0][2] if len(held) == 1 else KgramIndex.of(part.letters, params.align_k)
    return part, kgrams, len(part) / len(letters)


def _match(
    ctx: Context,
    text: str,
    suspect: _Suspect,
    candidate: Candidate,
    master: dict[str, Any],
    settings: MatchSettings,
    stream: _Stream = _PINYIN,
    rewrite: bool = False,
) -> Match | None:
    """The candidate aligned on the text: a match, or None when it holds too little.
    ``rewrite``: a candidate of the skeleton, judged as one (`_kept_as_rewrite`) whatever
    stream it is aligned in.

    A master hit once can only be a short excerpt: it is aligned on the part of it around
    the hit's characters (found by a plain search) rather than whole, and not at all when
    they are not in it verbatim. A master hit only a few times is aligned on the part its
    hits' places name (`_part_at_places`): most are long works sharing a phrase by chance.
    """
    chars = len(master["text"])
    # In the synonym stream one hit is enough to align a copy like one hit more often:
    # a rewrite leaves few granules whole (docs/accuracy.md, "Rewrites"), and a
    # quotation-sized excerpt is verbatim, for the pinyin stream to find.
    whole = candidate.hits >= settings.min_hits or stream is _SYNONYMS
    few = whole and candidate.hits < settings.ordered_hits_below and bool(candidate.places.all())
    if not whole:
        slack = EXCERPT_SLACK_LETTERS
    else:
        slack = FEW_HITS_SLACK_LETTERS if few else WINDOW_SLACK_LETTERS
    window, window_kgrams = _window(suspect, candidate, slack)
    share = 1.0  # of the master's letters aligned
    if whole:
        offset, part = 0, master["text"]
        first = np.searchsorted(suspect.letters.offsets, candidate.starts) - NEAR_HIT_LETTERS
        last = np.searchsorted(suspect.letters.offsets, candidate.ends) + NEAR_HIT_LETTERS
        if few:
            at_places = _part_at_places(master, candidate, suspect, first, last, ctx.params,
                                        suspect.min_kgrams(settings), stream)  # fmt: skip
            if at_places is None:
                return None
            letters, kgrams, share = at_places
        else:
            letters, kgrams = _master_letters(master, ctx.params, stream)
            # Not for a skeleton candidate in the pinyin stream: a rewrite broke its
            # letters where the skeleton hits are.
            near = kgrams.shared_within(suspect.kgrams, first, last)
            if near < suspect.min_kgrams(settings) and not rewrite:
                return None
    else:
        found = _around_hit(master["text"], text, candidate)
        if found is None:
            return None
        offset, part = found
        letters, kgrams = to_letters(part, ctx.params.latin_mode), None
    skeleton = rewrite or isinstance(suspect.letters, Skeleton)
    alignment = align_letters(
        letters,
        window,
        ctx.params,
        # Skeleton granules are shared by works as a matter of course: shared hits say
        # nothing of boilerplate there (a verbatim footer is the pinyin stream's to judge).
        keep=None if skeleton else lambda span: not candidate.is_boilerplate(span, chars, settings),
        master_kgrams=kgrams,
        suspect_kgrams=window_kgrams,
    )
    spans = tuple(span._replace(master_start=span.master_start + offset,
                                master_end=span.master_end + offset)
                  for span in alignment.spans)  # fmt: skip
    copied = _copied_chars(spans)
    master_coverage = alignment.master_coverage * share if whole else copied / max(chars, 1)
    # Coverage of the whole suspect, not of the window.
    suspect_coverage = alignment.suspect_coverage * len(window) / len(suspect.letters)
    coverage = max(master_coverage, suspect_coverage)
    enough = whole and (
        alignment.exact_weight >= settings.min_matched_letters
        or master_coverage >= settings.whole_master_coverage
    )
    if not (enough and coverage >= settings.min_coverage) and not any(
        _is_excerpt(part, text, span, longest, settings) and candidate.is_own(span)
        for span, longest in zip(alignment.spans, alignment.longest_exact, strict=True)
    ):
        return None
    if _in_heading(master, spans, settings):
        return None
    if skeleton and not _kept_as_rewrite(master["text"], text, spans, candidate.hits, coverage,
                                         settings):  # fmt: skip
        return None
    return Match(
        master=MasterRef(candidate.master_id, master["external_id"], master.get("title")),
        score=round(coverage, 4),
        hits=candidate.hits,
        master_coverage=round(master_coverage, 4),
        suspect_coverage=round(suspect_coverage, 4),
        spans=spans,
        copied_chars=copied,
    )


def _in_pinyin_too(candidate: Candidate, settings: MatchSettings) -> bool:
    """Whether a skeleton candidate the skeleton does not match is aligned in the pinyin
    stream (`MatchSettings.rewrite_pinyin_hits`); its hits' places, the skeleton's, are
    not read there (`_match` reads them below ``ordered_hits_below`` hits only)."""
    wanted = settings.rewrite_pinyin_hits
    return wanted is not None and candidate.hits >= max(wanted, settings.ordered_hits_below)


def _kept_as_rewrite(
    master: str,
    text: str,
    spans: Sequence[Span],
    hits: int,
    coverage: float,
    settings: MatchSettings,
) -> bool:
    """Whether the passages of a skeleton match keep what a rewrite keeps of the work: its
    characters in order (`kept_share`), the more so the less of it they cover, and its
    numbers (`kept_numbers`)."""
    if hits == 1:
        needed = settings.min_rewrite_kept_one_hit
    elif coverage >= settings.rewrite_whole_coverage:
        needed = settings.min_rewrite_kept_whole
    else:
        needed = settings.min_rewrite_kept
    return (
        kept_share(_span_texts(master, text, spans)) >= needed
        and kept_numbers(_span_texts(master, text, spans)) >= settings.min_rewrite_numbers
    )


def _span_texts(master: str, text: str, spans: Iterable[Span]) -> Iterator[tuple[str, str]]:
    return ((master[s.master_start : s.master_end], text[s.suspect_start : s.suspect_end])
            for s in spans)  # fmt: skip


def heading_end(text: str, title: str | None, settings: MatchSettings) -> int:
    """Where the heading of a work ends in its text: past its title when the text opens
    with it, and past its first line when that line ends within ``heading_chars``
    characters (a work in one paragraph has no first line apart from its body); 0 for a
    work shorter than twice its heading (a match of it is a match of much of it)."""
    start = len(text) - len(text.lstrip())
    if title and title.strip() and text.startswith(title.strip(), start):
        start += len(title.strip())
        start += len(text[start:]) - len(text[start:].lstrip())
    line = text.find("\n", start, start + settings.heading_chars + 1)
    end = line if line >= 0 else start
    return end if 2 * end <= len(text) else 0


def _in_heading(master: dict[str, Any], spans: Sequence[Span], settings: MatchSettings) -> bool:
    """Whether every passage lies in the work's heading (`heading_end`)."""
    end = heading_end(master["text"], master.get("title"), settings)
    return bool(spans) and all(s.master_end <= end + _HEADING_SLACK_CHARS for s in spans)


def _without_listing(matches: list[Match], settings: MatchSettings) -> list[Match]:
    """The matches without the quotation-sized ones when ``listing_works`` works or more
    are matched so (a listing: the page copies none of them)."""
    short = [m for m in matches if m.quotation]
    if len({m.master.id for m in short}) < settings.listing_works:
        return matches
    return [m for m in matches if not m.quotation]


def _around_hit(master: str, text: str, candidate: Candidate) -> tuple[int, str] | None:
    """Where the text of a candidate's one hit is in the master, by the characters in its
    middle: the part of the master ``EXCERPT_SLACK_CHARS`` around them (offset, text), or
    None when the master does not have them verbatim."""
    granule = text[int(candidate.starts[0]) : int(candidate.ends[0])]
    middle = len(granule) // 2
    probe = granule[max(0, middle - _PROBE_CHARS // 2) : middle + _PROBE_CHARS // 2]
    at = master.find(probe) if len(probe) == _PROBE_CHARS else -1
    if at < 0:
        return None
    start = max(0, at - EXCERPT_SLACK_CHARS)
    return start, master[start : at + EXCERPT_SLACK_CHARS]


def match_text(
    ctx: Context,
    text: str,
    settings: MatchSettings = DEFAULT_MATCH_SETTINGS,
    load_masters: MasterLoader = cached_masters,
) -> list[Match]:
    """The masters ``text`` copies, best first (deterministic order)."""
    return match_texts(ctx, [text], settings, load_masters)[0]


def match_texts(
    ctx: Context,
    texts: Sequence[str],
    settings: MatchSettings = DEFAULT_MATCH_SETTINGS,
    load_masters: MasterLoader = cached_masters,
) -> list[list[Match]]:
    """`match_text` of each text, with one index round trip and one read of candidate works
    for all of them (a batch of pages costs the servers a few commands, not a few per
    page)."""
    # Each text's letters, made once for its fingerprints and its alignments.
    letters = [to_letters(text, ctx.params.latin_mode) for text in texts]
    synonyms = [rewrite_stream(text, ctx.params) for text in texts]
    found = _candidates_of(ctx, texts, letters, synonyms, settings)
    wanted = [c.master_id for of_text in found for side in of_text for c in side]
    masters = load_masters(ctx, list(dict.fromkeys(wanted))) if wanted else {}
    return [
        _matches(ctx, text, (of_text, of_synonyms), candidates_of_text, masters, settings)
        for text, of_text, of_synonyms, candidates_of_text
        in zip(texts, letters, synonyms, found, strict=True)
    ]  # fmt: skip


def _matches(
    ctx: Context,
    text: str,
    letters: tuple[Letters, Letters | None],
    found: tuple[list[Candidate], list[Candidate]],
    masters: dict[int, dict[str, Any]],
    settings: MatchSettings,
) -> list[Match]:
    """The matches of one text: its pinyin stream's candidates aligned there, then the
    synonym stream's candidates that matched nothing so, aligned in the synonym stream."""
    matches: list[Match] = []
    for of_text, candidates_of_text, stream in zip(letters, found, (_PINYIN, _SYNONYMS),
                                                   strict=True):  # fmt: skip
        matched = {m.master.id for m in matches}
        todo = [c for c in candidates_of_text if c.master_id not in matched]
        if of_text is None or not todo:
            continue
        suspect = _Suspect.of(of_text, ctx.params)
        # Page text a verbatim copy explains is no rewrite of another work: a skeleton
        # aligns by chance with many, its letters being most texts' (`fingerprinter.skeleton`).
        copied = _copied_mask(text, matches) if isinstance(of_text, Skeleton) else None
        pinyin: _Suspect | None = None
        for candidate in todo:
            master = masters.get(candidate.master_id)
            if master is not None:  # else removed between the index lookup and now
                match = _match(ctx, text, suspect, candidate, master, settings, stream)
                if (match is None and isinstance(of_text, Skeleton)
                        and _in_pinyin_too(candidate, settings)):  # fmt: skip
                    pinyin = pinyin or _Suspect.of(letters[0], ctx.params)
                    match = _match(ctx, text, pinyin, candidate, master, settings,
                                   rewrite=True)  # fmt: skip
                if match is not None and not _explained(match, copied):
                    matches.append(match)
    matches.sort(key=lambda m: (-m.score, -m.hits, m.master.id))
    return _without_listing(matches, settings)
