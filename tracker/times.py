"""Times: aware UTC datetimes everywhere, one text form.

MongoDB clients are opened tz-aware (`mongo_client`), so a time read back compares with
``now()`` as it is; `iso` is the one text form of the CSV, the CLI's JSON and health.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pymongo


def now() -> datetime:
    """The current time, aware, in UTC."""
    return datetime.now(UTC)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 to the second, in UTC; None stays None."""
    return value.astimezone(UTC).isoformat(timespec="seconds") if value else None


def mongo_client(url: str, **options: Any) -> pymongo.MongoClient[Any]:
    """A MongoDB client whose datetimes come back aware, in UTC."""
    return pymongo.MongoClient(url, tz_aware=True, tzinfo=UTC, **options)
