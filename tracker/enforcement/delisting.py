"""Search-engine delisting: removal requests for confirmed findings in the forms the engines
take, recorded per URL, and re-checked through the discover search provider.

- Google's copyright removal form: a work's description and where it is published, then
  the infringing URLs, at most ``BATCH["google"]`` a request;
- Bing's copyright removal form: the same fields;
- Baidu's infringement complaint (侵权投诉): 作品名称, 权利人, 原创链接 and the 侵权链接.

An export (per work or per domain, one engine) is a CSV a reviewer submits on the engine's
form; exporting records each URL as requested (``delistings``, one record per URL and
engine). Later, where a search provider is configured (COPYTRACK_SEARCH_URL, as for discover
campaigns), ``recheck_delistings`` asks it for each requested URL and records ``delisted``
or ``still_listed`` with the date, within the day's query budget.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId
from pymongo import UpdateOne

from ..context import Context
from ..core.times import now as utc_now
from ..discovery.providers import SearchError, SearchProvider, provider_from_settings
from ..discovery.searches import spend_query
from ..findings.export import safe_cell
from ..findings.notices import notice_sender
from ..findings.status import CONFIRMED, NOTICE_SENT
from ..findings.workflow import WorkflowError

__all__ = [
    "ENGINES",
    "DelistingExport",
    "export_delisting",
    "recheck_delistings",
]

#: The engines, with their forms' names.
ENGINES = {
    "google": "Google — Copyright removal",
    "bing": "Bing — Copyright infringement notice",
    "baidu": "百度 — 侵权投诉",
}
#: Infringing URLs one request lists at most (Google's form takes 1,000 a notice; the
#: others are kept to the sizes their forms accept in one submission).
BATCH = {"google": 1000, "bing": 1000, "baidu": 100}
REQUESTED, DELISTED, STILL_LISTED = "requested", "delisted", "still_listed"
STATE_LABELS = {REQUESTED: "Requested", DELISTED: "Delisted", STILL_LISTED: "Still listed"}
#: A requested URL is first asked about this long after the request, then again as long
#: after each answer that it is still listed.
RECHECK_AFTER = timedelta(days=7)
RECHECK_BATCH = 50
#: Findings whose URLs a delisting request names: copies confirmed, noticed or not.
DELISTABLE = (CONFIRMED, NOTICE_SENT)

COLUMNS = {
    "google": ["batch", "work_description", "authorized_url", "infringing_url", "domain",
               "work_id", "finding_id"],
    "bing": ["batch", "work_title", "work_description", "original_url", "infringing_url",
             "domain", "work_id", "finding_id"],
    "baidu": ["批次", "作品名称", "作品编号", "权利人", "原创链接", "侵权链接", "侵权网站",
              "发现时间", "finding_id"],
}  # fmt: skip


@dataclass(frozen=True)
class DelistingExport:
    """An export: the engine, how many URLs in how many requests, and the CSV text."""

    engine: str
    urls: int
    batches: int
    csv: str


def _findings(ctx: Context, work: str | None, domain: str | None) -> list[dict[str, Any]]:
    if (work is None) == (domain is None):
        raise WorkflowError("a delisting export is of one work (--work) or one domain (--domain)")
    query: dict[str, Any] = {"status": {"$in": list(DELISTABLE)}}
    if work is not None:
        query["master_external_id"] = work.strip()
    else:
        query["domain"] = (domain or "").strip().lower()
    found = list(ctx.db.findings.find(query).sort([("master_external_id", 1), ("url", 1)]))
    if not found:
        what = f"work {work!r}" if work is not None else f"domain {domain!r}"
        raise WorkflowError(
            f"{what} has no confirmed finding: confirm its copies first (delisting asks for "
            "confirmed copies only)"
        )
    return found


def _published_at(master: dict[str, Any]) -> str:
    """Where the work is published: its ``source`` when that is a URL, or ``extra.url``."""
    for value in (master.get("source"), (master.get("extra") or {}).get("url")):
        if isinstance(value, str) and value.startswith(("http://", "https://")):
            return value
    return ""


def _rows(ctx: Context, engine: str, findings: list[dict[str, Any]]) -> list[list[str]]:
    masters = {
        m["_id"]: m
        for m in ctx.db.masters.find(
            {"_id": {"$in": list({f["master_id"] for f in findings})}},
            {"title": 1, "author": 1, "source": 1, "extra": 1},
        )
    }
    owner = notice_sender(ctx)["organization"]
    rows: list[list[str]] = []
    # Each work's URLs go in requests of their own: a request describes one work.
    by_work: dict[Any, list[dict[str, Any]]] = {}
    for finding in findings:
        by_work.setdefault(finding["master_id"], []).append(finding)
    batch = 0
    for master_id, listed in by_work.items():
        master = masters.get(master_id, {})
        title = master.get("title") or listed[0].get("master_title") or ""
        external_id = listed[0]["master_external_id"]
        author = f" by {master['author']}" if master.get("author") else ""
        description = f'"{title}"{author}, © {owner or "the rights holder"} ({external_id})'
        original = _published_at(master)
        for start in range(0, len(listed), BATCH[engine]):
            batch += 1
            for f in listed[start : start + BATCH[engine]]:
                fid = str(f["_id"])
                if engine == "google":
                    row = [batch, description, original, f["url"], f["domain"], external_id, fid]
                elif engine == "bing":
                    row = [batch, title, description, original, f["url"], f["domain"],
                           external_id, fid]  # fmt: skip
                else:
                    seen = f.get("first_seen")
                    row = [batch, title, external_id, owner, original, f["url"], f["domain"],
                           f"{seen:%Y-%m-%d}" if seen else "", fid]  # fmt: skip
                rows.append([str(v) for v in row])
    return rows


def export_delisting(
    ctx: Context,
    engine: str,
    *,
    work: str | None = None,
    domain: str | None = None,
    by: str,
    record: bool = True,
) -> DelistingExport:
    """The ``engine``'s requests for the confirmed findings of one work or one domain, as
    CSV; with ``record``, each URL is recorded as requested (a re-export keeps the first
    request's date). WorkflowError for an unknown engine or nothing to request."""
    if engine not in ENGINES:
        raise WorkflowError(f"unknown search engine {engine!r}: use {', '.join(ENGINES)}")
    findings = _findings(ctx, work, domain)
    rows = _rows(ctx, engine, findings)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS[engine])
    writer.writerows([[safe_cell(v) for v in row] for row in rows])
    if record:
        _record(ctx, engine, findings, by)
    batches = len({row[0] for row in rows})
    return DelistingExport(engine, len({f["url"] for f in findings}), batches, out.getvalue())


def _record(ctx: Context, engine: str, findings: list[dict[str, Any]], by: str) -> None:
    at = utc_now()
    by_url: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        by_url.setdefault(finding["url"], []).append(finding)
    ops = [
        UpdateOne(
            {"url": url, "engine": engine},
            {
                "$setOnInsert": {
                    "requested_at": at, "by": by, "state": REQUESTED,
                    "recheck_due": at + RECHECK_AFTER, "checks": [],
                },
                "$set": {"domain": listed[0]["domain"], "exported_at": at},
                "$addToSet": {"finding_ids": {"$each": [f["_id"] for f in listed]}},
            },
            upsert=True,
        )
        for url, listed in by_url.items()
    ]  # fmt: skip
    if ops:
        ctx.db.delistings.bulk_write(ops, ordered=False)


@dataclass(frozen=True)
class DelistingCheck:
    """A requested URL asked about: still in the engine's results, or gone."""

    url: str
    engine: str
    state: str


def _same(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def recheck_delistings(
    ctx: Context,
    provider: SearchProvider,
    at: datetime | None = None,
    limit: int = RECHECK_BATCH,
) -> list[DelistingCheck]:
    """Ask ``provider`` for each requested URL whose re-check is due, and record whether it
    is still listed. Stops at the day's budget or the provider's first error (SearchError
    is raised then, after recording what was checked)."""
    at = at or utc_now()
    checked: list[DelistingCheck] = []
    due = ctx.db.delistings.find({"recheck_due": {"$lte": at}}).sort("recheck_due", 1)
    for request in due.limit(limit):
        if not spend_query(ctx, provider.name):
            break
        try:
            results = provider.search(request["url"])
        except SearchError:
            if checked:
                break
            raise
        listed = any(_same(r.url, request["url"]) for r in results)
        state = STILL_LISTED if listed else DELISTED
        update: dict[str, Any] = {
            "$set": {"state": state, "checked_at": at},
            "$push": {"checks": {"at": at, "listed": listed, "provider": provider.name}},
        }
        if listed:
            update["$set"]["recheck_due"] = at + RECHECK_AFTER
        else:
            update["$unset"] = {"recheck_due": ""}
        ctx.db.delistings.update_one({"_id": request["_id"]}, update)
        checked.append(DelistingCheck(request["url"], request["engine"], state))
    return checked


def delistings_of(ctx: Context, finding_id: ObjectId) -> list[dict[str, Any]]:
    """The delisting requests naming a finding's URL, by engine."""
    return list(ctx.db.delistings.find({"finding_ids": finding_id}).sort("engine", 1))


def recheck_with_configured_provider(ctx: Context) -> list[DelistingCheck]:
    """``recheck_delistings`` through the configured search provider; nothing when none is
    configured (COPYTRACK_SEARCH_URL / COPYTRACK_SEARCH_PROVIDER)."""
    try:
        provider = provider_from_settings(ctx.settings)
    except SearchError:
        return []
    return recheck_delistings(ctx, provider)
