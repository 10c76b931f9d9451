"""What the admin shows of operators: the list with their counts, one operator's
findings and notices, and the domains lately found to be new domains of known operators."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import find_in
from ..core.times import now

#: Findings shown on an operator's page (the findings list, filtered by domain, has all).
FINDINGS_SHOWN = 100
#: How long a domain is listed on the dashboard as new.
NEW_DOMAIN_DAYS = 30
_FINDING_FIELDS = {"url": 1, "domain": 1, "status": 1, "score": 1, "master_title": 1,
                   "master_external_id": 1, "first_seen": 1, "operator_new_domain": 1}  # fmt: skip


def _domains(operator: dict[str, Any]) -> list[str]:
    return [d["domain"] for d in operator["domains"]]


def list_operators(ctx: Context) -> list[dict[str, Any]]:
    """Every operator with its findings and notices counted, most findings first."""
    operators = list(ctx.db.operators.find())
    for operator in operators:
        domains = _domains(operator)
        ids = [f["_id"] for f in ctx.db.findings.find({"domain": {"$in": domains}}, {"_id": 1})]
        operator["finding_count"] = len(ids)
        operator["notice_count"] = sum(
            1 for _ in find_in(ctx.db.notices, "finding_id", ids, {"_id": 1})
        )
    return sorted(operators, key=lambda o: (-o["finding_count"], _domains(o)))


def operator_detail(ctx: Context, operator_id: ObjectId) -> dict[str, Any] | None:
    """The operator with its findings (the latest FINDINGS_SHOWN), its notices, and the
    splits reviewers made of it."""
    operator = ctx.db.operators.find_one({"_id": operator_id})
    if operator is None:
        return None
    query = {"domain": {"$in": _domains(operator)}}
    operator["finding_count"] = ctx.db.findings.count_documents(query)
    operator["findings"] = list(
        ctx.db.findings.find(query, _FINDING_FIELDS).sort("first_seen", -1).limit(FINDINGS_SHOWN)
    )
    ids = [f["_id"] for f in ctx.db.findings.find(query, {"_id": 1})]
    operator["notices"] = sorted(
        find_in(ctx.db.notices, "finding_id", ids,
                {"recipient": 1, "sent_at": 1, "finding_id": 1, "subject": 1}),
        key=lambda n: n.get("sent_at") or datetime.min, reverse=True,
    )  # fmt: skip
    operator["splits"] = list(ctx.db.operator_splits.find({"operator_id": operator_id}))
    return operator


def new_operator_domains(ctx: Context, days: int = NEW_DOMAIN_DAYS) -> list[dict[str, Any]]:
    """Domains that joined a known operator in the last ``days`` days, newest first."""
    since = now() - timedelta(days=days)
    found = [
        {"operator_id": o["_id"], "domain": d["domain"], "joined_at": d["joined_at"],
         "operator": ", ".join(sorted(x for x in _domains(o) if x != d["domain"])[:3])}
        for o in ctx.db.operators.find({"domains.new": True}, {"domains": 1})
        for d in o["domains"]
        if d.get("new") and d["joined_at"] >= since
    ]  # fmt: skip
    return sorted(found, key=lambda d: d["joined_at"], reverse=True)
