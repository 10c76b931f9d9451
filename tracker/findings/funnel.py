"""The enforcement funnel's rows: per domain or per work, the copies found, those a reviewer
confirmed, those notified, those removed after a notice, how long removal took (median days
from the first notice), and the copies still there after their deadline.

The findings catalogue counts them (`Catalogue.funnel`); this module holds what a row is
and how rows are totalled and exported.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass
from typing import Any

from ..core.times import now as utc_now
from .export import safe_cell

__all__ = ["BY", "FUNNEL_COLUMNS", "FunnelRow", "funnel_csv", "funnel_totals"]

#: What a funnel's rows can be.
BY = ("domain", "work")
FUNNEL_COLUMNS = ("found", "confirmed", "notified", "removed", "median_days_to_removal",
                  "still_there")  # fmt: skip


@dataclass(frozen=True)
class FunnelRow:
    """One domain's or work's funnel: each stage a subset of the one before."""

    key: str
    title: str
    found: int
    confirmed: int
    notified: int
    removed: int
    median_days_to_removal: float | None
    still_there: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def funnel_totals(rows: list[FunnelRow]) -> dict[str, Any]:
    """The funnel of every row together (the median of the rows' medians is no median:
    it is left to the rows)."""
    return {name: sum(getattr(r, name) for r in rows)
            for name in FUNNEL_COLUMNS if name != "median_days_to_removal"}  # fmt: skip


def funnel_csv(rows: list[FunnelRow], by: str) -> str:
    """The funnel as CSV, one row a domain or work."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([by, "title", *FUNNEL_COLUMNS, "at"])
    at = f"{utc_now():%Y-%m-%dT%H:%M:%SZ}"
    for row in rows:
        values = [row.key, row.title, *(getattr(row, name) for name in FUNNEL_COLUMNS), at]
        writer.writerow([safe_cell(v) for v in values])
    return out.getvalue()
