"""Operators: the domains of findings tied together by the signals their captures share
(`tracker.operators.signals`), less the ties reviewers split.

`refresh_signals` reads the signals of the pages with findings whose capture (or address)
changed since; `group_operators` then ties every two domains that share a signal value
(a value more than MAX_DOMAINS_PER_VALUE domains share, a big host's address, ties
nobody), unless a split keeps them apart: a split of domain X off an operator keeps X
from ever joining the domains it was split from, whatever later crawls find.

An operator keeps its id while it keeps domains (a new grouping takes the id of the old
operator it shares most domains with). A domain that joins an operator known before is
*new*: its findings are marked (``operator_id``, ``operator_new_domain``) and the
dashboard lists it.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from bson import ObjectId

from ..context import Context
from ..core.store import changed, find_in, update_in
from ..core.times import now
from ..findings import invalidate_dashboard
from ..findings.captures import page_capture
from .signals import Signal, page_signals, redirect_sources

log = logging.getLogger(__name__)

#: A signal value shared by more domains than this ties none of them.
MAX_DOMAINS_PER_VALUE = 50


def _stamp(page: dict[str, Any]) -> str:
    """What a page's signals were read from: its capture and its address."""
    return f"{page.get('raw_sha256')}|{page.get('ip') or ''}"


def refresh_signals(ctx: Context) -> int:
    """Read again the signals of pages with findings whose capture or address changed (or
    were never read); how many were read."""
    page_ids = ctx.db.findings.distinct("page_id")
    fields = {"raw_sha256": 1, "ip": 1, "signals_of": 1}
    stale = [p["_id"] for p in find_in(ctx.db.pages, "_id", page_ids, fields)
             if p.get("signals_of") != _stamp(p)]  # fmt: skip
    for page_id in stale:
        page = ctx.db.pages.find_one({"_id": page_id}, {"text": 0, "text_file": 0})
        if page is None:
            continue
        signals = page_signals(page, page_capture(ctx, page))
        ctx.db.pages.update_one(
            {"_id": page_id, "raw_sha256": page.get("raw_sha256")},
            {"$set": {"signals": [s.as_record() for s in signals], "signals_of": _stamp(page)}},
        )
    return len(stale)


@dataclass
class _Domains:
    """Domains tied so far (union-find), each group's members known for the splits."""

    apart: list[tuple[str, set[str]]]  # (domain split off, the domains it may not join)
    parent: dict[str, str] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)

    def find(self, domain: str) -> str:
        self.parent.setdefault(domain, domain)
        self.members.setdefault(domain, {domain})
        while self.parent[domain] != domain:
            self.parent[domain] = self.parent[self.parent[domain]]
            domain = self.parent[domain]
        return domain

    def tie(self, a: str, b: str) -> bool:
        """Tie the groups of ``a`` and ``b`` unless a split keeps them apart."""
        root_a, root_b = self.find(a), self.find(b)
        if root_a == root_b:
            return True
        group_a, group_b = self.members[root_a], self.members[root_b]
        for split_off, others in self.apart:
            if (split_off in group_a and others & group_b) or (
                split_off in group_b and others & group_a
            ):
                return False
        self.parent[root_b] = root_a
        self.members[root_a] = group_a | self.members.pop(root_b)
        return True


def _holders(ctx: Context, findings: list[dict[str, Any]]) -> dict[Signal, dict[str, dict]]:
    """signal -> domain -> the first capture (page) of that domain that shows it."""
    domains_of_page = defaultdict(set)
    for finding in findings:
        domains_of_page[finding["page_id"]].add(finding["domain"])
    holders: dict[Signal, dict[str, dict]] = defaultdict(dict)
    fields = {"url": 1, "final_url": 1, "redirected_from": 1, "signals": 1}
    for page in find_in(ctx.db.pages, "_id", list(domains_of_page), fields):
        shown = {"page_id": page["_id"], "url": page.get("final_url") or page["url"]}
        signals = [Signal(s["kind"], s["value"]) for s in page.get("signals") or []]
        for domain in domains_of_page[page["_id"]]:
            for signal in signals:
                holders[signal].setdefault(domain, shown)
        # The domains that redirected here share the redirect's signal.
        for source in redirect_sources(page):
            for signal in signals:
                if signal.kind == "redirect":
                    holders[signal].setdefault(source, shown)
    return holders


def group_operators(ctx: Context) -> list[dict[str, Any]]:
    """Group the domains of findings into operators, store them (``operators``) and mark
    the findings of their new domains; returns the operators."""
    findings = list(ctx.db.findings.find({}, {"domain": 1, "page_id": 1, "first_seen": 1}))
    holders = _holders(ctx, findings)
    splits = list(ctx.db.operator_splits.find())
    domains = _Domains([(s["domain"], set(s["apart_from"])) for s in splits])
    for signal in sorted(holders, key=lambda s: (s.kind, s.value)):
        held = sorted(holders[signal])
        if 2 <= len(held) <= MAX_DOMAINS_PER_VALUE:
            for n, a in enumerate(held):
                for b in held[n + 1 :]:
                    domains.tie(a, b)
    groups = [sorted(m) for m in domains.members.values() if len(m) > 1]
    first_seen: dict[str, datetime] = {}
    for finding in findings:
        seen = finding.get("first_seen")
        if seen and (finding["domain"] not in first_seen or seen < first_seen[finding["domain"]]):
            first_seen[finding["domain"]] = seen
    operators = _keep_ids(ctx, groups, holders, first_seen)
    _store(ctx, operators)
    return operators


def _keep_ids(
    ctx: Context,
    groups: list[list[str]],
    holders: dict[Signal, dict[str, dict]],
    first_seen: dict[str, datetime],
) -> list[dict[str, Any]]:
    """The operators of ``groups``, each with the id (and the domains' join times) of the
    stored operator it shares most domains with."""
    before = {o["_id"]: o for o in ctx.db.operators.find()}
    taken: set[ObjectId] = set()
    at = now()
    operators = []
    for group in sorted(groups, key=lambda g: (-len(g), g)):
        members = set(group)
        overlap = [(len(members & {d["domain"] for d in o["domains"]}), o["_id"])
                   for o in before.values() if o["_id"] not in taken]  # fmt: skip
        best = max(overlap, default=(0, None))
        old = before.get(best[1]) if best[0] else None
        joined = {d["domain"]: d for d in (old or {}).get("domains", [])}
        if old is not None:
            taken.add(old["_id"])
        entries = [
            {
                "domain": domain,
                "joined_at": joined[domain]["joined_at"] if domain in joined else at,
                # Joined an operator known before: a new domain of a known operator.
                "new": joined[domain]["new"] if domain in joined else old is not None,
                "first_seen": first_seen.get(domain),
            }
            for domain in group
        ]
        ties = [
            {
                "kind": s.kind,
                "value": s.value,
                "shown_by": [
                    {"domain": d, **shown}
                    for d, shown in sorted(holders[s].items())
                    if d in members
                ],
            }
            for s in sorted(holders, key=lambda s: (s.kind, s.value))
            if len(members & set(holders[s])) >= 2
        ]
        operators.append({
            "_id": old["_id"] if old is not None else ObjectId(),
            "domains": entries,
            "ties": ties,
            "known_since": old["known_since"] if old is not None else at,
            "grouped_at": at,
        })  # fmt: skip
    return operators


def _store(ctx: Context, operators: list[dict[str, Any]]) -> None:
    kept = [o["_id"] for o in operators]
    for operator in operators:
        ctx.db.operators.replace_one({"_id": operator["_id"]}, operator, upsert=True)
    ctx.db.operators.delete_many({"_id": {"$nin": kept}})
    grouped = set()
    for operator in operators:
        for entry in operator["domains"]:
            grouped.add(entry["domain"])
            mark: dict[str, Any] = {"$set": {"operator_id": operator["_id"]}}
            if entry["new"]:
                mark["$set"]["operator_new_domain"] = True
            else:
                mark["$unset"] = {"operator_new_domain": ""}
            ctx.db.findings.update_many({"domain": entry["domain"]}, changed(mark))
    alone = [d for d in ctx.db.findings.distinct("domain", {"operator_id": {"$exists": True}})
             if d not in grouped]  # fmt: skip
    update_in(ctx.db.findings, "domain", alone,
              changed({"$unset": {"operator_id": "", "operator_new_domain": ""}}))  # fmt: skip
    invalidate_dashboard(ctx)


class SplitError(ValueError):
    """The split names no operator, or a domain it does not have."""


def split_domain(ctx: Context, operator_id: ObjectId, domain: str, by: str) -> dict[str, Any]:
    """Keep ``domain`` apart from the other domains of the operator from now on (across
    re-crawls), and group again; returns the split recorded."""
    operator = ctx.db.operators.find_one({"_id": operator_id})
    if operator is None:
        raise SplitError(f"no operator {operator_id}")
    others = [d["domain"] for d in operator["domains"] if d["domain"] != domain]
    if len(others) == len(operator["domains"]):
        raise SplitError(f"{domain} is not one of this operator's domains")
    split = {"_id": ObjectId(), "domain": domain, "apart_from": others,
             "operator_id": operator_id, "by": by, "at": now()}  # fmt: skip
    ctx.db.operator_splits.insert_one(split)
    log.info("%s split %s off operator %s (%s)", by, domain, operator_id, ", ".join(others))
    group_operators(ctx)
    return split


def update_operators(ctx: Context) -> int:
    """Read the signals of new captures and, if any, group again; how many were read."""
    read = refresh_signals(ctx)
    if read:
        group_operators(ctx)
    return read
