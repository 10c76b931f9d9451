"""The index's interface (`InvertedIndex`), what it answers (`Postings`, `IndexStats`), and
what every backend checks of what it is given."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

MAX_MASTER_ID = 2**32 - 1  # records hold ids as uint32

# A posting keeps where its granule lies in the work, coarsely: the granule's first letter
# // PLACE_LETTERS, modulo PLACES, plus 1 (0: not given). Two hits of a copied stretch
# lie as far apart in the work as in the page; fingerprints colliding by chance fall
# anywhere, and the matcher drops such candidates before reading their text.
PLACE_LETTERS = 32
PLACES = 255


def places_of(first_letters: np.ndarray) -> np.ndarray:
    """The places (1..PLACES) of granules starting at letters ``first_letters``."""
    return (np.asarray(first_letters, dtype=np.int64) // PLACE_LETTERS % PLACES + 1).astype(
        np.uint8
    )


class IndexVersionMismatch(RuntimeError):
    """The index was built with other fingerprint parameters or another layout."""

    def __init__(
        self, where: str, built: str | None, current: str, message: str | None = None
    ) -> None:
        super().__init__(
            message
            or f"{where} was built with version {built or '(none)'}, current parameters are "
            f"{current}: run `copytrack reindex` to rebuild it"
        )
        self.built = built
        self.current = current


@dataclass(frozen=True)
class IndexStats:
    """Size figures of an index; memory_bytes is what the backend's storage uses."""

    postings: int
    keys: int
    memory_bytes: int
    bytes_per_posting: float


@dataclass(frozen=True)
class MiscountedShard:
    """A shard of the index whose blocks disagree with the counts kept with them (in the
    same atomic write as the blocks): a block deleted, evicted or restored from elsewhere."""

    shard: int
    #: Blocks holding postings as the shard counted them, and as found.
    blocks: int
    blocks_found: int


@dataclass(frozen=True)
class Postings:
    """The postings a query hit, one row per (query fingerprint, master), as parallel arrays:
    ``query`` the fingerprint's position in the query, ``master`` the id, ``df`` how many
    masters list that fingerprint, ``exact`` whether the posting's check bits are the
    query's (always, for an index without them), ``place`` where the fingerprint's granule
    lies in the master (`places_of`; 0 where it was not given). Fingerprints listed by more
    than max_df masters have none.
    """

    query: np.ndarray
    master: np.ndarray
    df: np.ndarray
    exact: np.ndarray
    place: np.ndarray

    def __len__(self) -> int:
        return len(self.master)


class InvertedIndex(ABC):
    """fingerprint → master ids. Mutations are idempotent; queries keep query order."""

    @abstractmethod
    def add(
        self, master_id: int, fingerprints: Iterable[int], places: Iterable[int] | None = None
    ) -> int:
        """Index master_id under each fingerprint, with where its granule lies in the master
        (`places_of`, one per fingerprint; none given: 0); returns the number of new
        postings."""

    @abstractmethod
    def remove(self, master_id: int, fingerprints: Iterable[int]) -> int:
        """Drop master_id from each fingerprint's list; returns the postings removed."""

    @abstractmethod
    def _read(
        self, fingerprints: Sequence[int], max_df: int | None
    ) -> list[tuple[int, ...] | None]:
        """Sorted posting list per fingerprint, None where it is longer than max_df."""

    @abstractmethod
    def stats(self) -> IndexStats:
        """Postings, keys and memory figures."""

    @abstractmethod
    def clear(self) -> None:
        """Delete every posting and the version metadata."""

    @abstractmethod
    def ensure_version(self, version: str) -> None:
        """Record version on an empty index; raise IndexVersionMismatch if it differs."""

    @abstractmethod
    def generation(self) -> tuple[str | None, int]:
        """(the generation given by `set_generation`, the number of postings), both kept with
        the postings and read in one round trip: (None, 0) once the index is cleared or lost."""

    @abstractmethod
    def set_generation(self, generation: str) -> None:
        """Record which build of the index this is (`tracker.masters.generation`)."""

    @abstractmethod
    def begin_removal(self, token: str, until: float) -> None:
        """Note, beside the postings, that a removal of postings (token) is under way, until
        time ``until`` at the latest (a process killed midway never ends it), and count it
        among the removals begun (`removals`)."""

    @abstractmethod
    def end_removal(self, token: str) -> None:
        """The removal ``token`` is done (both its counts changed)."""

    @abstractmethod
    def removals(self, now: float) -> tuple[int, int]:
        """(removals begun since the index was made, those still under way at time now)."""

    @abstractmethod
    def reserve(self, postings: int) -> None:
        """Make room ahead for about ``postings`` postings to come (a large import)."""

    def miscounted_shards(self) -> list[MiscountedShard]:
        """The shards whose blocks disagree with the counts kept with them, every block
        looked at (a shard that writes kept changing meanwhile is left unchecked). An index
        that keeps no blocks has none."""
        return []

    def block_check_due(self, every: float, now: float) -> bool:
        """Whether no process checked the blocks (`miscounted_shards`) within ``every``
        seconds before ``now``; if none did, this one is to, and the others wait."""
        return True

    def add_many(self, masters: Sequence[IndexedMaster], fresh: bool = False) -> int:
        """`add` for several (master id, fingerprints[, places]); returns the new postings.
        fresh: the ids are new (none has a posting yet), which spares looking for ones in
        place."""
        return sum(self.add(*master) for master in masters)

    def lookup(self, fingerprints: Sequence[int]) -> list[tuple[int, ...]]:
        """Posting list (sorted master ids) of each fingerprint, in query order."""
        return [ids or () for ids in self._read(as_ints(fingerprints), None)]

    def postings(
        self, fingerprints: Sequence[int] | np.ndarray, max_df: int | None = None, kept: bool = True
    ) -> Postings:
        """The postings of the fingerprints listed by 1..max_df masters (see `Postings`);
        ``kept=False``: as stored, never from what the process keeps of the index."""
        query: list[int] = []
        master: list[int] = []
        df: list[int] = []
        for i, ids in enumerate(self._read(as_ints(fingerprints), max_df)):
            if ids:
                query += [i] * len(ids)
                master += ids
                df += [len(ids)] * len(ids)
        return Postings(
            np.array(query, dtype=np.int64),
            np.array(master, dtype=np.int64),
            np.array(df, dtype=np.int64),
            exact=np.ones(len(query), dtype=bool),
            place=np.zeros(len(query), np.uint8),
        )

    def count_hits(self, fingerprints: Iterable[int], max_df: int | None = None) -> dict[int, int]:
        """master id → number of distinct query fingerprints that hit it.

        Fingerprints whose posting list is longer than max_df are skipped: text that many
        masters share (site footers, boilerplate) must not create matches on its own.
        """
        hits: Counter[int] = Counter(
            self.postings(distinct_fingerprints(fingerprints), max_df).master.tolist()
        )
        return dict(hits)


#: What `InvertedIndex.add_many` takes of a master: (id, fingerprints) or (id,
#: fingerprints, places).
IndexedMaster = tuple[int, Iterable[int]] | tuple[int, Iterable[int], Iterable[int] | None]


def posting_lists(found: Postings, count: int, max_df: int | None) -> list[tuple[int, ...] | None]:
    """`InvertedIndex._read`'s lists from the postings of ``count`` fingerprints."""
    lists: dict[int, list[int]] = {}
    for i, master in zip(found.query.tolist(), found.master.tolist(), strict=True):
        lists.setdefault(i, []).append(master)
    out: list[tuple[int, ...] | None] = [()] * count
    for i, ids in lists.items():
        out[i] = None if max_df is not None and len(ids) > max_df else tuple(sorted(ids))
    return out


def as_ints(fingerprints: Iterable[int]) -> list[int]:
    """Fingerprints as Python ints (numpy scalars included), each an unsigned 64-bit."""
    out = [int(fp) for fp in fingerprints]
    if any(fp < 0 or fp >> 64 for fp in out):
        raise ValueError("fingerprints must be unsigned 64-bit integers")
    return out


def as_uint64(fingerprints: Iterable[int]) -> np.ndarray:
    if isinstance(fingerprints, np.ndarray) and fingerprints.dtype == np.uint64:
        return fingerprints
    return np.array(as_ints(fingerprints), dtype=np.uint64)


def distinct_fingerprints(fingerprints: Iterable[int]) -> list[int]:
    """Distinct fingerprints in first-seen order."""
    return list(dict.fromkeys(as_ints(fingerprints)))


def width_error(fingerprint_bits: int, check_bits: int) -> ValueError:
    checks = f" and {check_bits} check bits" if check_bits else ""
    return ValueError(f"fingerprints must fit in {fingerprint_bits} bits{checks}")


def given_places(places: Iterable[int] | None, count: int) -> np.ndarray:
    """The places given for ``count`` fingerprints (0 for each when none are)."""
    if places is None:
        return np.zeros(count, dtype=np.uint8)
    out = np.asarray(places if isinstance(places, np.ndarray) else list(places))
    if out.shape != (count,) or (count and (out.min() < 0 or out.max() > PLACES)):
        raise ValueError(f"places must be {count} numbers within 0..{PLACES}, one a fingerprint")
    return out.astype(np.uint8)


def checked_master(master_id: int) -> int:
    master_id = int(master_id)
    if not 0 <= master_id <= MAX_MASTER_ID:
        raise ValueError(f"master id {master_id} is outside 0..{MAX_MASTER_ID}")
    return master_id
