"""Times: aware UTC datetimes everywhere, one text form; local time only when shown.

MongoDB clients are opened tz-aware (`mongo_client`), so a time read back compares with
``now()`` as it is; `iso` is the one text form of the CSV, the CLI's JSON and health.
People read times in their zone (COPYTRACK_TIME_ZONE, or their own): `local` says one
with its offset, "2026-12-02 17:30 UTC+8".
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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


@lru_cache(maxsize=64)
def zone(name: str | None) -> ZoneInfo:
    """The time zone called ``name`` (IANA); UTC for none or a name this system lacks."""
    try:
        return ZoneInfo(name or "UTC")
    except (ZoneInfoNotFoundError, ValueError):
        return ZoneInfo("UTC")


def offset_label(value: datetime) -> str:
    """A datetime's offset from UTC as people write it: UTC, UTC+8, UTC-3:30."""
    offset = value.utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    if not minutes:
        return "UTC"
    sign, minutes = ("+" if minutes > 0 else "-"), abs(minutes)
    hours, rest = divmod(minutes, 60)
    return f"UTC{sign}{hours}" + (f":{rest:02d}" if rest else "")


def local(value: datetime, zone_name: str | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """``value`` in the zone ``zone_name``, with its offset: "2026-12-02 17:30 UTC+8"."""
    there = value.astimezone(zone(zone_name))
    return f"{there.strftime(fmt)} {offset_label(there)}"
