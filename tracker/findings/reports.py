"""Printable reports: the findings of one work, or of one domain, grouped for a reader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..context import Context
from ..library import find_masters
from .queries import domain_query
from .status import STATUSES


@dataclass
class Report:
    """A printable report: a subject, summary figures, and its findings grouped."""

    kind: str  # "work" or "domain"
    subject: str
    generated_at: datetime
    summary: dict[str, int]
    groups: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    master: dict[str, Any] | None = None


def _summary(findings: list[dict[str, Any]]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for finding in findings:
        counts[finding["status"]] = counts.get(finding["status"], 0) + 1
    pages = len({finding.get("page_id") or finding.get("url") for finding in findings})
    return {"total": len(findings), "pages": pages, **counts}


def _grouped(
    findings: list[dict[str, Any]], label: Callable[[dict[str, Any]], str]
) -> list[tuple[str, list[dict[str, Any]]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for finding in findings:
        groups.setdefault(label(finding), []).append(finding)
    return sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))


_REPORT_FIELDS = {"history": 0, "spans": 0}


def _work_label(finding: dict[str, Any]) -> str:
    external_id = finding.get("master_external_id") or str(finding.get("master_id"))
    title = finding.get("master_title")
    return f"{title} ({external_id})" if title else external_id


def work_report(ctx: Context, work: str) -> Report | None:
    """Where a work (external id, master id or work id) was found, grouped by domain."""
    masters = find_masters(ctx, work)
    if not masters:
        return None
    findings = list(
        ctx.db.findings.find(
            {"master_id": {"$in": [m["_id"] for m in masters]}}, _REPORT_FIELDS
        ).sort([("score", -1), ("_id", 1)])
    )
    master = masters[0]
    return Report(
        kind="work",
        subject=master.get("title") or master["external_id"],
        generated_at=datetime.now(UTC),
        summary=_summary(findings),
        groups=_grouped(findings, lambda f: f.get("domain") or "—"),
        master={k: v for k, v in master.items() if k != "text"},
    )


def domain_report(ctx: Context, domain: str) -> Report:
    """What a domain (and its subdomains) copies, grouped by work."""
    domain = domain.lower()
    findings = list(
        ctx.db.findings.find(domain_query(domain), _REPORT_FIELDS).sort([("score", -1), ("_id", 1)])
    )
    return Report(
        kind="domain",
        subject=domain,
        generated_at=datetime.now(UTC),
        summary=_summary(findings),
        groups=_grouped(findings, _work_label),
    )
