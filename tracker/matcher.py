"""Which masters does a text copy? Granule hits from the index, then passage alignment.

1. ``query_fingerprints`` of the text (a granule at every offset);
2. one round trip to Redis: hits per master, ignoring fingerprints that more than
   ``max_df`` masters share; a master hit only through fingerprints that other masters
   share too is no candidate (boilerplate such as site footers cannot match on its own —
   content-anchored granules give a shared passage the same fingerprints everywhere);
3. the masters with at least ``min_hits`` hits, best first, at most ``max_candidates``;
4. the second round, ``fingerprinter.align``: short passages where most hits are shared
   with other masters are boilerplate and dropped (a long one, or one that makes up most
   of the master, is content of near-duplicate masters: a copy of it copies each); a
   candidate is reported when the matched passages hold at least ``min_matched_letters``
   letters in exactly matching k-grams (``Alignment.exact_weight``: Latin letters weighted
   by ``FingerprintParams.latin_weight``) or, for masters too short to hold that many,
   cover ``whole_master_coverage`` of the master; and cover at least ``min_coverage`` of
   the master or of the suspect.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fingerprinter import Span, align_letters, query_array, to_letters

from .context import Context
from .library import master_texts


@dataclass(frozen=True)
class MatchSettings:
    """Thresholds of the matcher (defaults chosen by measurement, see docs/accuracy.md)."""

    min_hits: int = 1
    max_candidates: int = 10
    max_df: int = 20
    min_shared_hits: int = 12
    min_matched_letters: int = 100
    min_coverage: float = 0.05
    whole_master_coverage: float = 0.8
    boilerplate_max_chars: int = 150
    boilerplate_max_share: float = 0.5


DEFAULT_MATCH_SETTINGS = MatchSettings()

#: Fetches masters (``external_id``, ``text``, ``title``) by integer id: MongoDB by default;
#: evaluation sweeps pass one that reads masters kept in memory.
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


@dataclass(frozen=True)
class Candidate:
    """A master hit by the suspect's fingerprints, with where the hits are in the suspect."""

    master_id: int
    hits: int
    # (start, end, shared) per hit, in suspect characters; shared = other masters have it too
    where: tuple[tuple[int, int, bool], ...]

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
        inside = [
            shared
            for start, end, shared in self.where
            if span.suspect_start <= start and end <= span.suspect_end
        ]
        return sum(inside) > len(inside) - sum(inside)


def candidates(
    ctx: Context, text: str, settings: MatchSettings = DEFAULT_MATCH_SETTINGS
) -> list[Candidate]:
    """The masters worth aligning, most hits first, ties by id.

    A fingerprint in more than ``max_df`` masters is ignored; one in several masters
    (shared) counts as a hit but cannot make a candidate on its own unless there are
    ``min_shared_hits`` of them: text that masters share is usually boilerplate.
    """
    query = query_array(text, ctx.params)
    if len(query) == 0:
        return []
    where: dict[int, list[tuple[int, int, bool]]] = defaultdict(list)
    postings = ctx.index.lookup(query.values.tolist())
    for ids, start, end in zip(postings, query.starts.tolist(), query.ends.tolist(), strict=True):
        if 0 < len(ids) <= settings.max_df:
            for master_id in ids:
                where[master_id].append((start, end, len(ids) > 1))
    found = []
    for master_id, hits in where.items():
        distinctive = sum(not shared for _, _, shared in hits)
        if len(hits) >= settings.min_hits and (
            distinctive or len(hits) >= settings.min_shared_hits
        ):
            found.append(Candidate(master_id, len(hits), tuple(hits)))
    found.sort(key=lambda c: (-c.hits, c.master_id))
    return found[: settings.max_candidates]


def match_text(
    ctx: Context,
    text: str,
    settings: MatchSettings = DEFAULT_MATCH_SETTINGS,
    load_masters: MasterLoader = master_texts,
) -> list[Match]:
    """The masters ``text`` copies, best first (deterministic order)."""
    found = candidates(ctx, text, settings)
    if not found:
        return []
    masters = load_masters(ctx, [c.master_id for c in found])
    suspect = to_letters(text, ctx.params.latin_mode)
    matches = []
    for candidate in found:
        master = masters.get(candidate.master_id)
        if master is None:  # removed between the index lookup and now
            continue
        chars = len(master["text"])
        alignment = align_letters(
            to_letters(master["text"], ctx.params.latin_mode),
            suspect,
            ctx.params,
            keep=lambda span, c=candidate, n=chars: not c.is_boilerplate(span, n, settings),
        )
        coverage = max(alignment.master_coverage, alignment.suspect_coverage)
        enough = (
            alignment.exact_weight >= settings.min_matched_letters
            or alignment.master_coverage >= settings.whole_master_coverage
        )
        if not enough or coverage < settings.min_coverage:
            continue
        matches.append(
            Match(
                master=MasterRef(candidate.master_id, master["external_id"], master.get("title")),
                score=round(coverage, 4),
                hits=candidate.hits,
                master_coverage=round(alignment.master_coverage, 4),
                suspect_coverage=round(alignment.suspect_coverage, 4),
                spans=alignment.spans,
            )
        )
    matches.sort(key=lambda m: (-m.score, -m.hits, m.master.id))
    return matches
