"""MongoDB collections of copytrack, their indexes, and compact integer ids."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, OperationFailure

from .batches import batched

log = logging.getLogger(__name__)

INDEX_OPTIONS_CONFLICT = 85  # MongoDB: an index of these keys exists with other options
INDEX_KEY_SPECS_CONFLICT = 86

# Values in one `$in` list at most (`find_in`, `update_in`): SecantusDB compares each
# document found with every value of the list (1,000 values took it 1.2 s, 4,000 took 17 s;
# 4,000 values in lists of 32-64, 0.6-1.0 s); MongoDB takes long lists in its stride, and
# the few more round trips cost it little.
IN_VALUES = 50
# A list that finds nothing costs SecantusDB far less a value (measured at 100,000 works:
# 0.047 ms in lists of 50, 0.024 in lists of 400; found values 0.23 and 0.66): the names
# and hashes of a first import, none of them stored yet, go in lists that double up to
# this while a list finds nothing.
IN_VALUES_NONE_FOUND = 400

# Every upsert and lookup key has an index: SecantusDB (and MongoDB at scale) would scan.
INDEXES: dict[str, list[tuple[list[tuple[str, int]], dict[str, Any]]]] = {
    "masters": [
        ([("external_id", ASCENDING)], {"unique": True}),
        # Unique: concurrent adds of one text under two ids must not store it twice.
        ([("sha256", ASCENDING)], {"unique": True}),
        ([("work_id", ASCENDING)], {}),
        ([("state", ASCENDING)], {}),
    ],
    "pages": [
        ([("url", ASCENDING)], {"unique": True}),
        ([("content_sha256", ASCENDING)], {}),
        ([("run_id", ASCENDING)], {}),
        ([("scanned_at", DESCENDING)], {}),  # health(): when did the last scan happen
        # A chapter's pages, walked back (tracker.scanning.chains); few pages have one.
        ([("next_url", ASCENDING)], {"sparse": True}),
        # Pages whose text is still to be scanned, by the run that stored them.
        ([("scan_due", ASCENDING)], {"sparse": True}),
        # Captures still to be time-stamped, by when to ask (tracker.evidence.timestamps).
        ([("timestamp_due", ASCENDING)], {"sparse": True}),
        # The pages showing an image read by OCR: it is deleted with the last of them.
        ([("ocr_images.file", ASCENDING)], {"sparse": True}),
    ],
    "findings": [
        ([("page_id", ASCENDING), ("master_id", ASCENDING)], {"unique": True}),
        ([("master_id", ASCENDING)], {}),
        ([("status", ASCENDING)], {}),
        ([("last_seen", DESCENDING)], {}),
        ([("run_id", ASCENDING)], {}),
        ([("campaign", ASCENDING)], {}),
        ([("domain", ASCENDING)], {}),
        ([("first_seen", ASCENDING)], {}),
        # The queue (copies) and the quotation-sized findings kept out of it, by status.
        ([("quotation", ASCENDING), ("status", ASCENDING)], {}),
        # What changed since the admin's findings catalogue last looked (CHANGED_AT).
        ([("changed_at", ASCENDING)], {}),
    ],
    # A tombstone of each deleted finding, for the catalogue (delete_findings).
    "findings_gone": [([("gone_at", ASCENDING)], {})],
    "notices": [([("finding_id", ASCENDING)], {})],
    "campaigns": [([("name", ASCENDING)], {"unique": True})],
    "runs": [
        ([("campaign", ASCENDING), ("started_at", DESCENDING)], {}),
        ([("state", ASCENDING)], {}),
    ],
    "run_problems": [
        ([("run_id", ASCENDING), ("outcome", ASCENDING), ("reason", ASCENDING)], {}),
    ],
    # Alerts (tracker.enforcement): subscriptions by name; deliveries still to be tried,
    # those of a finding (its timeline) and the log, newest first.
    "subscriptions": [([("name", ASCENDING)], {"unique": True})],
    "deliveries": [
        ([("next_attempt_at", ASCENDING)], {"sparse": True}),
        ([("finding_ids", ASCENDING)], {}),
        ([("created_at", DESCENDING)], {}),
    ],
    # Search-engine delisting requests, one per (URL, engine); re-checked by date.
    "delistings": [
        ([("url", ASCENDING), ("engine", ASCENDING)], {"unique": True}),
        ([("finding_ids", ASCENDING)], {}),
        ([("recheck_due", ASCENDING)], {"sparse": True}),
    ],
    # RDAP answers and bootstrap files, by what was asked (tracker.enforcement.rdap).
    "rdap_cache": [([("fetched_at", ASCENDING)], {})],
}


def ensure_indexes(db: Database) -> None:
    """Create the indexes every query and upsert relies on (idempotent).

    An index that a library made before with other options (the text hash was not unique
    before) is rebuilt with them; where the data forbids it (a library that already holds
    a text twice), the old index stays and a warning says which masters to remove.
    """
    for collection, specs in INDEXES.items():
        for keys, options in specs:
            try:
                db[collection].create_index(keys, **options)
            except OperationFailure as err:
                if err.code not in (INDEX_OPTIONS_CONFLICT, INDEX_KEY_SPECS_CONFLICT):
                    raise
                _rebuild_index(db[collection], keys, options)


def _rebuild_index(
    collection: Collection, keys: list[tuple[str, int]], options: dict[str, Any]
) -> None:
    name = "_".join(f"{field}_{order}" for field, order in keys)
    collection.drop_index(name)
    try:
        collection.create_index(keys, **options)
    except DuplicateKeyError as err:
        collection.create_index(keys)
        log.warning(
            "%s: %s is not unique yet (%s): remove the duplicate masters with `copytrack "
            "library rm ID`, then any command makes it unique",
            collection.name,
            name,
            err.details.get("keyValue") if err.details else err,
        )


def last_id(db: Database, name: str) -> int:
    """The last integer `next_id` gave of a named sequence (0 before the first)."""
    return int((db.counters.find_one({"_id": name}) or {}).get("seq", 0))


def next_id(db: Database, name: str, count: int = 1) -> int:
    """The next integer of a named sequence (1, 2, …), atomic across processes; with
    count, the first of that many consecutive integers reserved at once."""
    for _ in range(3):
        try:
            doc = db.counters.find_one_and_update(
                {"_id": name},
                {"$inc": {"seq": count}},
                upsert=True,
                return_document=ReturnDocument.AFTER,
            )
        except DuplicateKeyError:  # two first uses raced to create the counter: again
            continue
        if doc is not None:
            return int(doc["seq"]) - count + 1
    raise RuntimeError(f"counter {name!r}: no value after 3 tries (is MongoDB healthy?)")


#: Reads and updates `update_found` tries while other writers change the document between.
UPDATE_TRIES = 100


def update_found(
    collection: Collection,
    query: Mapping[str, Any],
    update: Mapping[str, Any] | Callable[[Mapping[str, Any]], Mapping[str, Any]],
    projection: Mapping[str, Any] | None = None,
    after: bool = False,
) -> dict[str, Any] | None:
    """``find_one_and_update`` without upsert, as a read and an update by ``_id`` of the
    document read, applied only while it still matches ``query`` and has the projected
    fields' values read (else read again): the document before the update (after it with
    ``after``), or None when none matches. ``update`` may be a function of the document
    read.

    Why not findAndModify: the embedded MongoDB (SecantusDB) runs one that matches a
    document as a scan of the whole collection, 12 ms at 800 pages and 30 ms at 2,400
    (`benchmarks/bench_recrawl.py`); a read and an update by ``_id`` use the indexes.
    """
    read = [name for name, kept in (projection or {}).items() if kept and name != "_id"]
    for _ in range(UPDATE_TRIES):
        found = collection.find_one(query, projection)
        if found is None:
            return None
        # A field read absent matches absent or null, as it was.
        same = {**query, **{name: found.get(name) for name in read}, "_id": found["_id"]}
        change = update(found) if callable(update) else update
        if collection.update_one(same, change).matched_count:
            return collection.find_one({"_id": found["_id"]}, projection) if after else found
    raise RuntimeError(
        f"{collection.name}: the document matching {dict(query)!r} changed under each of "
        f"{UPDATE_TRIES} updates (other processes writing it in a loop?)"
    )


def find_in(
    collection: Collection,
    field: str,
    values: Iterable[Any],
    projection: Mapping[str, Any] | None = None,
    also: Mapping[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """The documents whose ``field`` is one of ``values`` (and that match ``also``), in
    queries of IN_VALUES values, or more while they find none (IN_VALUES_NONE_FOUND)."""
    remaining = iter(values)
    size = IN_VALUES
    while chunk := list(islice(remaining, size)):
        found = False
        for document in collection.find({field: {"$in": chunk}, **(also or {})}, projection):
            found = True
            yield document
        size = IN_VALUES if found else min(2 * size, IN_VALUES_NONE_FOUND)


def update_in(
    collection: Collection, field: str, values: Iterable[Any], update: Mapping[str, Any]
) -> None:
    """`update_many` of the documents whose ``field`` is one of ``values``, in updates of
    IN_VALUES values."""
    for chunk in batched(values, IN_VALUES):
        collection.update_many({field: {"$in": chunk}}, update)


def all_of(clauses: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The query matching every clause: one document while the clauses name different
    fields, the others under ``$and``. The embedded MongoDB (SecantusDB) uses no index for
    a query with ``$and``: it scans the collection (23 ms at 800 pages, measured)."""
    merged: dict[str, Any] = {}
    rest: list[Mapping[str, Any]] = []
    for clause in clauses:
        if "$and" in clause or any(name in merged for name in clause):
            rest.append(clause)
        else:
            merged.update(clause)
    if rest:
        merged["$and"] = rest
    return merged


#: Set on every write of a finding (`changed`): the admin's findings catalogue
#: (tracker.findings.catalogue) reads what changed since it last looked through its index.
CHANGED_AT = "changed_at"
#: Tombstones of deleted findings are kept this long; a catalogue that has not looked for
#: longer loads everything again.
GONE_KEPT = timedelta(days=2)


def changed(update: Mapping[str, Any], at: datetime | None = None) -> dict[str, Any]:
    """``update`` (of findings) that also sets their ``changed_at``."""
    out = {op: dict(fields) for op, fields in update.items()}
    out.setdefault("$set", {})[CHANGED_AT] = at or datetime.now(UTC)
    return out


def delete_findings(db: Database, query: Mapping[str, Any]) -> int:
    """Delete the findings matching ``query``, leaving a tombstone of each in
    ``findings_gone`` (a catalogue drops them); returns how many were deleted.

    The tombstones go first: a catalogue that reads one of a finding still there keeps it.
    """
    ids = [found["_id"] for found in db.findings.find(query, {"_id": 1})]
    if not ids:
        return 0
    at = datetime.now(UTC)
    db.findings_gone.insert_many([{"finding_id": found, "gone_at": at} for found in ids])
    deleted = sum(
        db.findings.delete_many({**query, "_id": {"$in": chunk}}).deleted_count
        for chunk in batched(ids, IN_VALUES)
    )
    db.findings_gone.delete_many({"gone_at": {"$lt": at - GONE_KEPT}})
    return deleted
