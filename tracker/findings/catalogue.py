"""The findings catalogue: the fields a findings list filters, sorts and counts on, held in
memory as columns (numpy arrays) with an index of the searched texts, for the admin.

Why: the embedded MongoDB (SecantusDB) reads every document an index matches and sorts,
skips and limits in Python, so a list, a count or a search of 100,000 findings takes
seconds there whatever the indexes. The catalogue answers them in milliseconds and reads
from MongoDB only the page of findings shown.

MongoDB stays the truth; the catalogue is a cache of it, kept in step before every answer:
every write of a finding sets its ``changed_at`` (`tracker.core.store.changed`), indexed, and
every deletion leaves a tombstone in ``findings_gone`` (`tracker.core.store.delete_findings`);
the catalogue reads what changed since it last looked (a few milliseconds when nothing
did). The same holds with a production MongoDB, where it is as correct and faster still.
Storage is behind `FindingSource`, so a test (or another store) can feed it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from statistics import median
from typing import Any, Protocol

import numpy as np
from bson import ObjectId
from pymongo.database import Database

from ..core.batches import batched
from ..core.store import CHANGED_AT, GONE_KEPT, IN_VALUES, find_in
from .deadlines import (
    AWAITING,
    GONE,
    NOTICE_STAGES,
    OVERDUE,
    RETRY_UNREACHABLE,
    STILL_THERE,
    UNREACHABLE,
)
from .funnel import BY, FunnelRow
from .queries import _WITH_PORT, FindingFilter, Neighbours, day_start
from .status import CONFIRMED, NOT_COPIES, NOTICE_SENT, REMOVED, STATUSES

log = logging.getLogger(__name__)

#: The fields of a finding the catalogue keeps.
FIELDS = {
    "status": 1,
    "score": 1,
    "hits": 1,
    "master_coverage": 1,
    "copied_chars": 1,
    "first_seen": 1,
    "last_seen": 1,
    "domain": 1,
    "site": 1,
    "campaign": 1,
    "master_id": 1,
    "master_title": 1,
    "master_external_id": 1,
    "page_id": 1,
    "page_title": 1,
    "url": 1,
    "quotation": 1,
    "notice_deadline": 1,
    "notice_check": 1,
    # What the enforcement funnel needs of a finding's history (not its notes).
    "history.status": 1,
    "history.at": 1,
    CHANGED_AT: 1,
}
#: Writers' clocks may be this far behind the admin's: what changed that long before the
#: last look is looked at again (and read again only if its ``changed_at`` moved).
CLOCK_MARGIN = timedelta(seconds=5)
_NUMBERS = ("score", "hits", "master_coverage", "copied_chars", "first_seen", "last_seen")
_DATES = ("first_seen", "last_seen", "notice_deadline", "check_at", "noticed_at", "removed_at",
          CHANGED_AT)  # fmt: skip
# Keyed by what a finding holds, which may be missing (None).
_OUTCOME_CODE: dict[str | None, int] = {GONE: 0, STILL_THERE: 1, UNREACHABLE: 2}
_STATUS_CODE: dict[str | None, int] = {status: code for code, status in enumerate(STATUSES)}
_MS = 1000.0


def _ms(value: Any) -> float:
    """A date as milliseconds since 1970 (NaN when missing), as MongoDB stores it."""
    if not isinstance(value, datetime):
        return float("nan")
    if value.tzinfo is None:  # pymongo returns naive UTC unless told otherwise
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * _MS)


def _number(value: Any) -> float:
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if numeric else np.nan


class FindingSource(Protocol):
    """Where the catalogue reads findings from (MongoDB: `MongoFindings`)."""

    def clock(self) -> datetime: ...
    def everything(self) -> Iterable[dict[str, Any]]: ...
    def changed_since(self, at: datetime) -> Iterable[tuple[ObjectId, datetime | None]]: ...
    def read(self, ids: Sequence[ObjectId]) -> Iterable[dict[str, Any]]: ...
    def gone_since(self, at: datetime) -> Iterable[ObjectId]: ...
    def page_titles(self, page_ids: Sequence[Any]) -> dict[Any, str]: ...


class MongoFindings:
    """The findings of a MongoDB database (given as a function: the admin reconnects)."""

    def __init__(self, db: Callable[[], Database]) -> None:
        self._db = db

    def clock(self) -> datetime:
        return datetime.now(UTC)

    def everything(self) -> Iterable[dict[str, Any]]:
        return self._db().findings.find({}, FIELDS, batch_size=5000)

    def changed_since(self, at: datetime) -> Iterable[tuple[ObjectId, datetime | None]]:
        found = self._db().findings.find({CHANGED_AT: {"$gte": at}}, {CHANGED_AT: 1})
        return ((f["_id"], f.get(CHANGED_AT)) for f in found)

    def read(self, ids: Sequence[ObjectId]) -> Iterable[dict[str, Any]]:
        return find_in(self._db().findings, "_id", ids, FIELDS)

    def gone_since(self, at: datetime) -> Iterable[ObjectId]:
        return (g["finding_id"] for g in self._db().findings_gone.find({"gone_at": {"$gte": at}}))

    def page_titles(self, page_ids: Sequence[Any]) -> dict[Any, str]:
        pages = find_in(self._db().pages, "_id", page_ids, {"title": 1})
        return {page["_id"]: page.get("title") or "" for page in pages}


class Texts:
    """Distinct texts of one field (work titles, URLs, domains...), each with a small
    integer; with ``searched``, an index of the pairs of characters each contains, so a
    search reads the texts holding its rarest pair, not every text."""

    def __init__(self, searched: bool = False) -> None:
        self.values: list[str] = []
        self._ids: dict[str, int] = {}
        self._lower: list[str] = []
        self._pairs: dict[str, list[int]] | None = {} if searched else None
        self._ranks: np.ndarray | None = None

    def id_of(self, value: Any) -> int:
        text = value if isinstance(value, str) else "" if value is None else str(value)
        found = self._ids.get(text)
        if found is not None:
            return found
        found = self._ids[text] = len(self.values)
        self.values.append(text)
        self._ranks = None
        if self._pairs is not None:
            lower = text.lower()
            self._lower.append(lower)
            for pair in {lower[i : i + 2] for i in range(len(lower) - 1)}:
                self._pairs.setdefault(pair, []).append(found)
        return found

    def find(self, value: str) -> int | None:
        return self._ids.get(value)

    def containing(self, words: str) -> np.ndarray:
        """Ids of the texts containing ``words``, in any case."""
        wanted = words.lower()
        if self._pairs is None:
            raise TypeError("this field is not searched")
        if len(wanted) < 2:
            candidates: Iterable[int] = range(len(self._lower))
        else:
            lists: list[list[int]] = [
                self._pairs.get(wanted[i : i + 2], []) for i in range(len(wanted) - 1)
            ]
            shortest = min(lists, key=len)
            candidates = shortest
        return np.fromiter((i for i in candidates if wanted in self._lower[i]), dtype=np.int64)

    def matching(self, test: Callable[[str], bool]) -> np.ndarray:
        """Ids of the texts for which ``test`` holds (for fields of few texts: domains)."""
        return np.fromiter((i for i, v in enumerate(self.values) if test(v)), dtype=np.int64)

    def ranks(self) -> np.ndarray:
        """Each id's place in the texts' sorted order (MongoDB sorts strings so too)."""
        if self._ranks is None:
            order = np.argsort(np.array(self.values, dtype=object), kind="stable")
            self._ranks = np.empty(len(order), dtype=np.int64)
            self._ranks[order] = np.arange(len(order))
        return self._ranks


class _Columns:
    """Growable columns, one row a finding."""

    def __init__(self) -> None:
        self.size = 0
        self.capacity = 0
        self.arrays: dict[str, np.ndarray] = {}
        keys = ("master", "domain", "site", "campaign", "page", "title", "external_id", "url")
        self.kinds = {
            **{name: (np.float64, np.nan) for name in (*_NUMBERS, *_DATES)},
            "alive": (np.bool_, False),
            "settled": (np.bool_, False),
            "ever_confirmed": (np.bool_, False),
            "outcome": (np.int16, -1),
            "quotation": (np.bool_, False),
            "status": (np.int16, -1),
            "oid_hi": (np.uint64, 0),
            "oid_lo": (np.uint32, 0),
            **{name: (np.int64, -1) for name in (*keys, "page_title")},
        }
        self._grow(1024)

    def _grow(self, capacity: int) -> None:
        for name, (dtype, empty) in self.kinds.items():
            grown: np.ndarray = np.full(capacity, empty, dtype=dtype)
            if name in self.arrays:
                grown[: self.size] = self.arrays[name][: self.size]
            self.arrays[name] = grown
        self.capacity = capacity

    def append(self) -> int:
        if self.size == self.capacity:
            self._grow(self.capacity * 2)
        self.size += 1
        return self.size - 1

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name][: self.size]


@dataclass(frozen=True)
class Figures:
    """Dashboard figures counted from the catalogue."""

    by_status: dict[str, int]
    per_day: list[dict[str, Any]]
    new_this_week: int
    top_domains: list[dict[str, Any]]
    top_works: list[dict[str, Any]]
    notices: dict[str, int]
    quotations_hidden: int


class Catalogue:
    """The findings' list fields in memory, in step with ``source`` before each answer."""

    def __init__(self, source: FindingSource) -> None:
        self.source = source
        self._lock = threading.RLock()
        self._looked: datetime | None = None
        self.loaded_in_s: float | None = None
        self._loader: threading.Thread | None = None
        self._reset()

    # Loading in the background -----------------------------------------------------

    def load_in_background(self) -> None:
        """Load every finding in a thread (an admin's start): its first pages can then
        say the list is being prepared instead of waiting for the whole load (14 s at
        100,000 findings on SecantusDB)."""
        with self._lock:
            if self._looked is not None or self._loader is not None:
                return
            self._loader = threading.Thread(
                target=self._load_quietly, daemon=True, name="findings-catalogue"
            )
            self._loader.start()  # started before anyone can join it

    def _load_quietly(self) -> None:
        try:
            self.refresh()
        except Exception:  # the next answer loads it on its request, and says what failed
            log.exception("loading the findings catalogue failed; the next request retries")
        finally:
            self._loader = None

    def preparing(self, wait_s: float = 0.0) -> bool:
        """Whether a background load still runs, after waiting up to ``wait_s`` for it."""
        loader = self._loader
        if loader is None:
            return False
        loader.join(wait_s)
        return loader.is_alive()

    @property
    def rows_read(self) -> int:
        """Findings read so far (while loading: how far the load is)."""
        return self._cols.size

    def _reset(self) -> None:
        self._rows: dict[ObjectId, int] = {}
        self._ids: list[ObjectId | None] = []
        self._cols = _Columns()
        self._texts = {
            name: Texts(searched=name in ("title", "external_id", "url", "page_title"))
            for name in ("domain", "site", "campaign", "title", "external_id", "url",
                         "page_title")
        }  # fmt: skip
        self._pages: dict[Any, int] = {}
        self._page_keys: list[Any] = []
        self._orders: dict[str, np.ndarray] = {}
        self._masters: dict[int, int] = {}  # master id -> row of one of its findings

    # Keeping in step ---------------------------------------------------------------

    def refresh(self) -> None:
        """Read what changed in the store since the last look (everything, the first time
        or after longer than tombstones are kept)."""
        with self._lock:
            started = self.source.clock()
            if self._looked is None or started - self._looked > GONE_KEPT - CLOCK_MARGIN:
                self._load(started)
                return
            since = self._looked - CLOCK_MARGIN
            stamps = self._cols[CHANGED_AT]
            moved = [
                oid
                for oid, at in self.source.changed_since(since)
                if (row := self._rows.get(oid)) is None or stamps[row] != _ms(at)
            ]
            for chunk in batched(moved, IN_VALUES * 8):
                self._put_all(list(self.source.read(chunk)))
            gone = [oid for oid in self.source.gone_since(since) if oid in self._rows]
            if gone:  # a tombstone of a finding still there (a racing scan) is no deletion
                there = {doc["_id"] for doc in self.source.read(gone)}
                for oid in gone:
                    if oid not in there:
                        self._drop(oid)
            self._looked = started

    def _load(self, started: datetime) -> None:
        self._reset()
        batch: list[dict[str, Any]] = []
        for doc in self.source.everything():
            batch.append(doc)
            if len(batch) >= 5000:
                self._put_all(batch)
                batch = []
        self._put_all(batch)
        self._looked = started
        self.loaded_in_s = (self.source.clock() - started).total_seconds()

    def _put_all(self, docs: list[dict[str, Any]]) -> None:
        untitled = [d["page_id"] for d in docs if "page_title" not in d and "page_id" in d]
        titles = self.source.page_titles(list(dict.fromkeys(untitled))) if untitled else {}
        for doc in docs:
            if "page_title" not in doc:
                doc["page_title"] = titles.get(doc.get("page_id"), "")
            self._put(doc)
        if docs:
            self._orders.clear()

    def _put(self, doc: dict[str, Any]) -> None:
        oid = doc["_id"]
        row = self._rows.get(oid)
        cols = self._cols
        if row is None:
            row = self._rows[oid] = cols.append()
            self._ids.append(oid)
            raw = oid.binary
            cols.arrays["oid_hi"][row] = int.from_bytes(raw[:8], "big")
            cols.arrays["oid_lo"][row] = int.from_bytes(raw[8:], "big")
        a = cols.arrays
        a["alive"][row] = True
        a["status"][row] = _STATUS_CODE.get(doc.get("status"), -1)
        for name in ("score", "hits", "master_coverage", "copied_chars"):
            a[name][row] = _number(doc.get(name))
        check = doc.get("notice_check") or {}
        for name in ("first_seen", "last_seen", "notice_deadline", CHANGED_AT):
            a[name][row] = _ms(doc.get(name))
        a["check_at"][row] = _ms(check.get("at"))
        a["settled"][row] = check.get("settled") is True
        a["outcome"][row] = _OUTCOME_CODE.get(check.get("outcome"), -1)
        a["quotation"][row] = bool(doc.get("quotation"))
        history = doc.get("history") or []
        a["noticed_at"][row] = _ms(next(
            (h.get("at") for h in history if h.get("status") == NOTICE_SENT), None
        ))  # fmt: skip
        last = history[-1] if history else {}
        a["removed_at"][row] = _ms(last.get("at")) if last.get("status") == REMOVED else np.nan
        a["ever_confirmed"][row] = any(h.get("status") == CONFIRMED for h in history)
        master = doc.get("master_id")
        a["master"][row] = master if isinstance(master, int) else -1
        if isinstance(master, int):
            self._masters[master] = row
        for name, field in (("domain", "domain"), ("campaign", "campaign"),
                            ("title", "master_title"), ("external_id", "master_external_id"),
                            ("url", "url"), ("page_title", "page_title")):  # fmt: skip
            a[name][row] = self._texts[name].id_of(doc.get(field))
        a["site"][row] = self._texts["site"].id_of(doc.get("site") or doc.get("domain"))
        a["page"][row] = self._page_of(doc.get("page_id"))

    def _page_of(self, page_id: Any) -> int:
        found = self._pages.get(page_id)
        if found is None:
            found = self._pages[page_id] = len(self._page_keys)
            self._page_keys.append(page_id)
        return found

    def _drop(self, oid: ObjectId) -> None:
        row = self._rows.pop(oid)
        self._cols.arrays["alive"][row] = False
        self._ids[row] = None
        self._orders.clear()

    # Answers -----------------------------------------------------------------------

    def __len__(self) -> int:
        self.refresh()
        with self._lock:
            return len(self._rows)

    def _mask(
        self,
        flt: FindingFilter,
        masters: Sequence[int] | None,
        at: datetime,
    ) -> np.ndarray:
        c = self._cols
        mask = c["alive"].copy()
        if flt.status:
            mask &= np.isin(c["status"], [_STATUS_CODE[s] for s in flt.status])
        if masters is not None:
            mask &= np.isin(c["master"], np.asarray(masters, dtype=np.int64))
        if flt.notice:
            mask &= self._stage(flt.notice, at)
        if flt.q:
            found = np.zeros(c.size, dtype=bool)
            for name in ("title", "external_id", "url", "page_title"):
                found |= np.isin(c[name], self._texts[name].containing(flt.q))
            mask &= found
        if flt.domain:
            mask &= np.isin(*self._domain(flt.domain))
        if flt.campaign:
            mask &= c["campaign"] == self._id_or_none("campaign", flt.campaign)
        if flt.page_id:
            mask &= c["page"] == self._pages.get(flt.page_id, -2)
        for name, low, high in (("score", flt.min_score, flt.max_score),
                                ("copied_chars", flt.min_copied, flt.max_copied)):  # fmt: skip
            if low is not None:
                mask &= c[name] >= low
            if high is not None:
                mask &= c[name] <= high
        if flt.since:
            mask &= c["first_seen"] >= _ms(day_start(flt.since))
        if flt.until:  # up to its last moment, as MongoDB's $lte (9999-12-31 has no next day)
            mask &= c["first_seen"] < _ms(day_start(flt.until)) + 86_400 * _MS
        size = getattr(flt, "size", None)  # copies, quotations or any (quotation sizes)
        if size == "copies":
            mask &= ~c["quotation"]
        elif size == "quotations":
            mask &= c["quotation"]
        return mask

    def _stage(self, stage: str, at: datetime) -> np.ndarray:
        """`deadlines.stage_query` of the rows: those at ``stage`` of their notice."""
        c = self._cols
        now = _ms(at)
        sent = c["status"] == _STATUS_CODE[NOTICE_SENT]
        deadline = c["notice_deadline"]
        if stage == AWAITING:
            return sent & (deadline > now)
        if stage == OVERDUE:
            again = c["check_at"] <= _ms(at - RETRY_UNREACHABLE)
            retry = (c["outcome"] != _OUTCOME_CODE[UNREACHABLE]) | again
            return sent & (deadline <= now) & ~c["settled"] & retry
        if stage == STILL_THERE:
            return sent & c["settled"] & (c["outcome"] == _OUTCOME_CODE[STILL_THERE])
        if stage == GONE:
            return (c["status"] == _STATUS_CODE[REMOVED]) & ~np.isnan(deadline)
        raise ValueError(f"unknown notice stage {stage!r}: use one of {', '.join(NOTICE_STAGES)}")

    def _id_or_none(self, name: str, value: str) -> int:
        found = self._texts[name].find(value)
        return -2 if found is None else found

    def _domain(self, domain: str) -> tuple[np.ndarray, np.ndarray]:
        """The column and the ids of `queries.domain_query`'s domains: the site, with a
        port; else the domain or its subdomains."""
        if _WITH_PORT.fullmatch(domain):
            return self._cols["site"], np.array([self._id_or_none("site", domain)])
        tail = "." + domain
        return self._cols["domain"], self._texts["domain"].matching(
            lambda d: d == domain or d.endswith(tail)
        )

    def _order(self, sort: str) -> np.ndarray:
        """Every row in the order of ``sort``, ties by ``_id`` descending (as MongoDB's
        `queries.sort_spec`); missing values sort first ascending, last descending."""
        found = self._orders.get(sort)
        if found is not None:
            return found
        c = self._cols
        key = sort.lstrip("-")
        if key == "domain":
            ranks = self._texts["domain"].ranks()
            values = ranks[c["domain"]].astype(np.float64)
        else:
            values = np.where(np.isnan(c[key]), -np.inf, c[key])
        if sort.startswith("-"):
            values = -values
        order = np.lexsort((~c["oid_lo"], ~c["oid_hi"], values))
        self._orders[sort] = order
        return order

    def ordered(self, flt: FindingFilter, masters: Sequence[int] | None = None) -> list[ObjectId]:
        """Ids of the findings matching ``flt`` in its order; ``masters``: the works that
        ``flt.work`` names (the library's to say)."""
        return [self._ids[row] for row in self._rows_of(flt, masters)]

    def _rows_of(self, flt: FindingFilter, masters: Sequence[int] | None) -> np.ndarray:
        self.refresh()
        with self._lock:
            order = self._order(flt.sort)
            return order[self._mask(flt, masters, datetime.now(UTC))[order]]

    def page(
        self,
        flt: FindingFilter,
        page: int,
        per_page: int,
        masters: Sequence[int] | None = None,
    ) -> tuple[list[ObjectId], int]:
        """The ids of one page of the list, and how many findings the list holds."""
        rows = self._rows_of(flt, masters)
        with self._lock:
            shown = rows[(page - 1) * per_page : page * per_page]
            return [self._ids[row] for row in shown], len(rows)

    def neighbours(
        self,
        flt: FindingFilter,
        finding_id: ObjectId,
        masters: Sequence[int] | None = None,
    ) -> Neighbours:
        """`queries.neighbours` over the whole list."""
        rows = self._rows_of(flt, masters)
        with self._lock:
            row = self._rows.get(finding_id)
            at = np.flatnonzero(rows == row) if row is not None else np.array([])
            total = len(rows)
            if not len(at):
                return Neighbours(None, self._ids[rows[0]] if total else None, None, total)
            i = int(at[0])
            before = self._ids[rows[i - 1]] if i > 0 else None
            after = self._ids[rows[i + 1]] if i + 1 < total else None
            return Neighbours(before, after, i + 1, total)

    def figures(self, now: datetime, days: int, there: tzinfo = UTC) -> Figures:
        """Copies (quotation-sized findings only counted) by status, by day first seen
        (the last ``days`` of zone ``there``), new this week, and the sites and works with
        most live copies."""
        self.refresh()
        with self._lock:
            c = self._cols
            alive = c["alive"]
            quotations = int(np.count_nonzero(alive & c["quotation"]))
            copies = alive & ~c["quotation"]
            status = c["status"][copies]
            counts = np.bincount(status[status >= 0], minlength=len(STATUSES))
            by_status = {s: int(counts[i]) for i, s in enumerate(STATUSES)}
            first_day = (now.astimezone(there) - timedelta(days=days - 1)).date()
            first = c["first_seen"][copies]
            # Where each local day starts (a zone's offset may change within the range).
            starts = np.array([
                _ms(datetime.combine(first_day + timedelta(days=n), time.min, tzinfo=there))
                for n in range(days + 1)
            ])  # fmt: skip
            day = np.searchsorted(starts, first, side="right") - 1
            per_day_n = np.bincount(day[(day >= 0) & (day < days)], minlength=days)
            per_day = [
                {"day": (first_day + timedelta(days=n)).isoformat(), "findings": int(per_day_n[n])}
                for n in range(days)
            ]
            week = int(np.count_nonzero(first >= _ms(now - timedelta(days=7))))
            live = copies & ~np.isin(c["status"], [_STATUS_CODE[s] for s in NOT_COPIES])
            sites, masters = c["site"][live], c["master"][live]
            site_of, master_of = _distinct_pairs(sites, masters) if len(sites) else (sites, masters)
            top_domains = [
                {"domain": self._texts["site"].values[site], "findings": n, "works": w}
                for site, n, w in _top(sites, site_of, self._texts["site"].ranks())
            ]
            titles = {
                m: (self._texts["external_id"].values[c["external_id"][r]],
                    self._texts["title"].values[c["title"][r]])
                for m, r in self._masters.items()
            }  # fmt: skip
            top_works = [
                {"master_id": master, "external_id": titles.get(master, ("", ""))[0],
                 "title": titles.get(master, ("", ""))[1], "pages": n, "domains": d}
                for master, n, d in _top(masters, master_of, None)
            ]  # fmt: skip
            notices = {
                stage: int(np.count_nonzero(self._stage(stage, now) & alive))
                for stage in NOTICE_STAGES
            }
            return Figures(by_status, per_day, week, top_domains, top_works, notices, quotations)

    def funnel(self, by: str = "domain", limit: int | None = None) -> list[FunnelRow]:
        """The enforcement funnel per domain or per work (``by``), most copies found first
        (the first ``limit``); findings dismissed or licensed are left out. A copy removed
        counts as confirmed when a reviewer had confirmed or notified it before it went."""
        if by not in BY:
            raise ValueError(f"a funnel is by {' or '.join(BY)}, not {by!r}")
        self.refresh()
        with self._lock:
            c = self._cols
            code = _STATUS_CODE
            status = c["status"]
            live = c["alive"] & ~np.isin(status, [code[s] for s in NOT_COPIES])
            noticed = ~np.isnan(c["noticed_at"])
            removed = status == code[REMOVED]
            sent = status == code[NOTICE_SENT]
            confirmed = live & (
                (status == code[CONFIRMED]) | sent | (removed & (noticed | c["ever_confirmed"]))
            )
            notified = confirmed & noticed
            gone = notified & removed
            still = notified & sent & c["settled"] & (c["outcome"] == _OUTCOME_CODE[STILL_THERE])
            field = "domain" if by == "domain" else "external_id"
            rows = np.flatnonzero(live)
            keys, first, group = np.unique(c[field][rows], return_index=True, return_inverse=True)

            def per_key(stage: np.ndarray) -> np.ndarray:
                return np.bincount(group, weights=stage[rows], minlength=len(keys))

            days: dict[int, list[float]] = {}
            timed = gone[rows] & ~np.isnan(c["removed_at"][rows])
            took = np.maximum(c["removed_at"][rows] - c["noticed_at"][rows], 0) / (86400 * _MS)
            for g, d in zip(group[timed], took[timed], strict=True):
                days.setdefault(int(g), []).append(float(d))
            found = np.bincount(group, minlength=len(keys))
            stages = [per_key(stage) for stage in (confirmed, notified, gone, still)]
            texts, titles = self._texts[field].values, self._texts["title"].values
            # Most copies first, ties by name: only the rows asked for are made.
            order = np.lexsort((self._texts[field].ranks()[keys], -found))[:limit]
            funnel = []
            for g in order.tolist():
                title = "" if by == "domain" else titles[c["title"][rows[first[g]]]]
                n_confirmed, n_notified, n_removed, n_still = (int(s[g]) for s in stages)
                took_days = round(median(days[g]), 1) if g in days else None
                funnel.append(FunnelRow(texts[keys[g]], title, int(found[g]), n_confirmed,
                                        n_notified, n_removed, took_days, n_still))  # fmt: skip
        return funnel


#: Pairs of keys marked in a table of booleans up to this many cells, else sorted.
_PAIR_CELLS = 50_000_000


def _distinct_pairs(keys: np.ndarray, others: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (key, other) pairs, as two arrays (keys and others are >= -1)."""
    keys, others = keys + 1, others + 1  # -1 (none) is a value too
    width = int(others.max()) + 1
    cells = (int(keys.max()) + 1) * width
    pair = keys * width + others
    if cells <= _PAIR_CELLS:  # a table: linear, where sorting 100,000 pairs takes 50 ms
        seen = np.zeros(cells, dtype=bool)
        seen[pair] = True
        found = np.flatnonzero(seen)
    else:
        found = np.unique(pair)
    return found // width - 1, found % width - 1


def _top(
    keys: np.ndarray, pairs: np.ndarray, ranks: np.ndarray | None, n: int = 10
) -> Iterator[tuple[int, int, int]]:
    """The ``n`` keys with most rows (ties by their ``ranks``, or by key), with their rows
    and how many distinct others they have (``pairs``: the keys of the distinct pairs)."""
    if not len(keys):
        return
    values, counts = np.unique(keys, return_counts=True)
    distinct = dict(zip(*np.unique(pairs, return_counts=True), strict=True))
    ties = values if ranks is None else ranks[values]
    for i in np.lexsort((ties, -counts))[:n]:
        yield int(values[i]), int(counts[i]), int(distinct[values[i]])
