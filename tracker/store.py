"""MongoDB collections of copytrack, their indexes, and compact integer ids."""

from __future__ import annotations

from typing import Any

from pymongo import ASCENDING, DESCENDING, ReturnDocument
from pymongo.database import Database

# Every upsert and lookup key has an index: SecantusDB (and MongoDB at scale) would scan.
INDEXES: dict[str, list[tuple[list[tuple[str, int]], dict[str, Any]]]] = {
    "masters": [
        ([("external_id", ASCENDING)], {"unique": True}),
        ([("sha256", ASCENDING)], {}),
        ([("work_id", ASCENDING)], {}),
        ([("state", ASCENDING)], {}),
    ],
    "pages": [
        ([("url", ASCENDING)], {"unique": True}),
        ([("content_sha256", ASCENDING)], {}),
        ([("run_id", ASCENDING)], {}),
        ([("scanned_at", DESCENDING)], {}),  # health(): when did the last scan happen
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
    ],
    "notices": [([("finding_id", ASCENDING)], {})],
    "campaigns": [([("name", ASCENDING)], {"unique": True})],
    "runs": [
        ([("campaign", ASCENDING), ("started_at", DESCENDING)], {}),
        ([("state", ASCENDING)], {}),
    ],
}


def ensure_indexes(db: Database) -> None:
    """Create the indexes every query and upsert relies on (idempotent)."""
    for collection, specs in INDEXES.items():
        for keys, options in specs:
            db[collection].create_index(keys, **options)


def next_id(db: Database, name: str, count: int = 1) -> int:
    """The next integer of a named sequence (1, 2, …), atomic across processes; with
    count, the first of that many consecutive integers reserved at once."""
    doc = db.counters.find_one_and_update(
        {"_id": name}, {"$inc": {"seq": count}}, upsert=True, return_document=ReturnDocument.AFTER
    )
    return int(doc["seq"]) - count + 1
