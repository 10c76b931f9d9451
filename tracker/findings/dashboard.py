"""Dashboard figures: findings by status, by day and by domain, the most copied works,
where takedown notices stand and the latest runs, aggregated at most once a minute (cached
in Redis)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Any

from ..context import Context
from ..core.times import zone
from .deadlines import notice_stages
from .queries import size_query
from .status import NOT_COPIES, OPEN, STATUSES

if TYPE_CHECKING:
    from .catalogue import Catalogue

DASHBOARD_MAX_AGE_S = 60


DAYS_CHARTED = 30


#: A finding's site (host[:port]); findings recorded before sites were kept have their host.
_SITE = {"$ifNull": ["$site", "$domain"]}


def invalidate_dashboard(ctx: Context) -> None:
    """Drop the cached dashboard figures (after a reviewer changed statuses)."""
    ctx.redis.delete(ctx.keys.dashboard)


def _compute_dashboard(ctx: Context, now: datetime) -> dict[str, Any]:
    findings = ctx.db.findings
    # Quotation-sized findings are kept out of every figure but the count of them.
    copies = size_query("copies")
    by_status = {s: 0 for s in STATUSES}
    for row in findings.aggregate(
        [{"$match": copies}, {"$group": {"_id": "$status", "n": {"$sum": 1}}}]
    ):
        by_status[row["_id"]] = row["n"]
    # Days of the installation's zone: a Beijing newsroom's day starts at 16:00 UTC.
    there = zone(ctx.settings.time_zone)
    first_day = (now.astimezone(there) - timedelta(days=DAYS_CHARTED - 1)).date()
    per_day = dict.fromkeys(
        ((first_day + timedelta(days=n)).isoformat() for n in range(DAYS_CHARTED)), 0
    )
    first_start = datetime.combine(first_day, time.min, tzinfo=there)
    for row in findings.aggregate(
        [
            {"$match": {"first_seen": {"$gte": first_start.astimezone(UTC)}, **copies}},
            {
                "$group": {
                    "_id": {
                        "$dateToString": {
                            "format": "%Y-%m-%d",
                            "date": "$first_seen",
                            "timezone": there.key,
                        }
                    },
                    "n": {"$sum": 1},
                }
            },
        ]
    ):
        if row["_id"] in per_day:
            per_day[row["_id"]] = row["n"]
    live = {"status": {"$nin": list(NOT_COPIES)}, **copies}
    top_domains = [
        {"domain": row["_id"], "findings": row["n"], "works": len(row["works"])}
        for row in findings.aggregate(
            [
                {"$match": live},
                {
                    "$group": {
                        "_id": _SITE,
                        "n": {"$sum": 1},
                        "works": {"$addToSet": "$master_id"},
                    }
                },
                {"$sort": {"n": -1, "_id": 1}},
                {"$limit": 10},
            ]
        )
    ]
    top_works = [
        {
            "master_id": row["_id"],
            "external_id": row["external_id"],
            "title": row["title"],
            "pages": row["n"],
            "domains": len(row["domains"]),
        }
        for row in findings.aggregate(
            [
                {"$match": live},
                {
                    "$group": {
                        "_id": "$master_id",
                        "n": {"$sum": 1},
                        "external_id": {"$first": "$master_external_id"},
                        "title": {"$first": "$master_title"},
                        "domains": {"$addToSet": _SITE},
                    }
                },
                {"$sort": {"n": -1, "_id": 1}},
                {"$limit": 10},
            ]
        )
    ]
    week_ago = now - timedelta(days=7)
    return {
        "computed_at": now.isoformat(),
        "by_status": by_status,
        "open": sum(by_status[s] for s in OPEN),
        "new_this_week": findings.count_documents({"first_seen": {"$gte": week_ago}, **copies}),
        "quotations_hidden": findings.count_documents(size_query("quotations")),
        "per_day": [{"day": day, "findings": n} for day, n in per_day.items()],
        "top_domains": top_domains,
        "top_works": top_works,
        "notices": notice_stages(ctx, now),
        "works": ctx.db.masters.estimated_document_count(),
    }


def _counted(ctx: Context, catalogue: Catalogue, now: datetime) -> dict[str, Any]:
    """The dashboard's figures counted from a findings catalogue (milliseconds)."""
    figures = catalogue.figures(now, DAYS_CHARTED, zone(ctx.settings.time_zone))
    return {
        "computed_at": now.isoformat(),
        "by_status": figures.by_status,
        "open": sum(figures.by_status[s] for s in OPEN),
        "new_this_week": figures.new_this_week,
        "quotations_hidden": figures.quotations_hidden,
        "per_day": figures.per_day,
        "top_domains": figures.top_domains,
        "top_works": figures.top_works,
        "notices": figures.notices,
        "works": ctx.db.masters.estimated_document_count(),
    }


def dashboard(
    ctx: Context, max_age_s: int = DASHBOARD_MAX_AGE_S, catalogue: Catalogue | None = None
) -> dict[str, Any]:
    """Dashboard figures, aggregated at most once per ``max_age_s`` (cached in Redis), or
    counted from ``catalogue`` on every call.

    The aggregations scan the findings; caching keeps a busy dashboard from scanning on
    every request, and a status change drops the cache so reviewers see their own work.
    """
    if catalogue is not None:
        return _counted(ctx, catalogue, datetime.now(UTC))
    cached = ctx.redis.get(ctx.keys.dashboard)
    if cached is not None:
        return json.loads(cached)
    figures = _compute_dashboard(ctx, datetime.now(UTC))
    ctx.redis.set(ctx.keys.dashboard, json.dumps(figures), ex=max_age_s)
    return figures


def recent_runs(ctx: Context, limit: int = 10) -> list[dict[str, Any]]:
    """The latest runs of all campaigns, newest first."""
    return list(ctx.db.runs.find().sort([("started_at", -1), ("_id", -1)]).limit(limit))
