"""Licensed domains (syndication partners): a whitelist whose findings are ``licensed``.

Adding a domain marks its findings licensed, remembering each one's status; removing it
gives them back, unless another entry still covers them."""

from __future__ import annotations

import unicodedata
from typing import Any
from urllib.parse import urlsplit

from bson import ObjectId

from ..context import Context
from ..core.store import all_of, changed
from ..core.times import now
from .dashboard import invalidate_dashboard
from .queries import domain_query
from .status import LICENSED, MAX_NOTE_CHARS, NOTICE_READY, REVIEWER_STATUSES, history_entry
from .workflow import WorkflowError


def normalize_domain(value: str) -> str:
    """A bare lower-case host name from ``example.com``, ``*.example.com`` or a URL.

    Raises WorkflowError when it is not a plausible domain name.
    """
    value = value.strip()
    host = urlsplit(value).hostname if "://" in value else value.split("/")[0]
    host = (host or "").lower().removeprefix("*.").rstrip(".")
    try:
        host = unicodedata.normalize("NFC", host).encode("idna").decode("ascii")
    except UnicodeError:
        raise WorkflowError(f"{value!r} is not a domain name") from None
    labels = host.split(".")
    if len(labels) < 2 or not all(
        label and len(label) <= 63 and label.replace("-", "").isalnum() for label in labels
    ):
        raise WorkflowError(f"{value!r} is not a domain name (e.g. partner.example.com)")
    return host


def licensed_domain_of(ctx: Context, host: str) -> str | None:
    """The whitelist entry covering ``host`` (itself or a parent domain), if any."""
    labels = host.lower().split(".")
    suffixes = [".".join(labels[i:]) for i in range(len(labels) - 1)]
    entry = ctx.db.whitelist.find_one({"_id": {"$in": suffixes}}, {"_id": 1})
    return entry["_id"] if entry else None


def list_licensed_domains(ctx: Context) -> list[dict[str, Any]]:
    """The whitelist, by domain."""
    return list(ctx.db.whitelist.find().sort("_id", 1))


def _suppress(ctx: Context, query: dict[str, Any], domain: str, by: str) -> int:
    """Mark matching findings licensed, remembering each one's status to restore it later."""
    moved = 0
    for status in REVIEWER_STATUSES:
        moved += ctx.db.findings.update_many(
            all_of([query, {"status": status}]),
            changed(
                {
                    "$set": {
                        "status": LICENSED,
                        "status_at": now(),
                        "licensed_by": domain,
                        "status_before_license": status,
                    },
                    "$push": {
                        "history": history_entry(
                            LICENSED, now(), by, f"{domain} is a licensed domain"
                        )
                    },
                }
            ),
        ).modified_count
    return moved


#: Reviewers' decisions a whitelist change relabels: worth a warning first.
DECIDED = NOTICE_READY


def _count_by(ctx: Context, query: dict[str, Any], field: str) -> dict[str, int]:
    rows = ctx.db.findings.aggregate(
        [{"$match": query}, {"$group": {"_id": f"${field}", "n": {"$sum": 1}}}]
    )
    return {row["_id"]: row["n"] for row in rows if row["_id"] in DECIDED}


def decisions_relabelled_by_adding(ctx: Context, domain: str) -> dict[str, int]:
    """How many findings reviewers decided on (confirmed, notice sent) whitelisting
    ``domain`` would mark licensed, by status: what to warn about before doing it."""
    domain = normalize_domain(domain)
    query = all_of([domain_query(domain), {"status": {"$in": list(DECIDED)}}])
    return _count_by(ctx, query, "status")


def decisions_relabelled_by_removing(ctx: Context, domain: str) -> dict[str, int]:
    """How many licensed findings taking ``domain`` off the whitelist would give back a
    reviewer's decision (confirmed, notice sent), by that status."""
    domain = normalize_domain(domain)
    query = {"licensed_by": domain, "status": LICENSED}
    return _count_by(ctx, query, "status_before_license")


def add_licensed_domain(ctx: Context, domain: str, by: str, note: str | None = None) -> int:
    """Whitelist a domain (and its subdomains); returns how many findings it suppressed.

    Without a note, a domain added again keeps the note it had (also after a removal)."""
    domain = normalize_domain(domain)
    note = (note or "").strip()[:MAX_NOTE_CHARS]
    if not note:
        earlier = ctx.db.whitelist.find_one({"_id": domain}) or ctx.db.whitelist_removed.find_one(
            {"_id": domain}
        )
        note = (earlier or {}).get("note") or ""
    ctx.db.whitelist.update_one(
        {"_id": domain},
        {"$set": {"note": note}, "$setOnInsert": {"by": by, "at": now()}},
        upsert=True,
    )
    changed = _suppress(ctx, domain_query(domain), domain, by)
    invalidate_dashboard(ctx)
    return changed


def remove_licensed_domain(ctx: Context, domain: str, by: str) -> int:
    """Take a domain off the whitelist; its findings get back the status they had before.

    Findings still covered by another entry (a parent or a subdomain entry) stay licensed.
    Returns how many findings were restored.
    """
    domain = normalize_domain(domain)
    entry = ctx.db.whitelist.find_one_and_delete({"_id": domain})
    if entry is None:
        raise WorkflowError(f"{domain} is not on the whitelist")
    # Its note (a contract, an expiry) comes back if the domain is licensed again.
    ctx.db.whitelist_removed.replace_one(
        {"_id": domain}, {"note": entry.get("note") or "", "by": by, "at": now()}, upsert=True
    )
    restored = 0
    for status in REVIEWER_STATUSES:
        restored += ctx.db.findings.update_many(
            {"licensed_by": domain, "status": LICENSED, "status_before_license": status},
            changed(
                {
                    "$set": {"status": status, "status_at": now()},
                    "$unset": {"licensed_by": "", "status_before_license": ""},
                    "$push": {
                        "history": history_entry(
                            status, now(), by, f"{domain} is no longer licensed"
                        )
                    },
                }
            ),
        ).modified_count
    for entry in list_licensed_domains(ctx):
        other = entry["_id"]
        if other.endswith("." + domain) or domain.endswith("." + other):
            restored -= _suppress(ctx, domain_query(other), other, by)
    invalidate_dashboard(ctx)
    return restored


def suppress_licensed(ctx: Context, page_id: ObjectId, by: str = "copytrack") -> int:
    """Mark a freshly scanned page's findings licensed when its domain is whitelisted.

    Meant to run right after ``record_findings``, so new findings on a partner's site
    never show up as ``new``. Returns how many findings it suppressed.
    """
    page = ctx.db.findings.find_one({"page_id": page_id}, {"domain": 1})
    if page is None or not page.get("domain"):
        return 0
    domain = licensed_domain_of(ctx, page["domain"])
    if domain is None:
        return 0
    changed = _suppress(ctx, {"page_id": page_id}, domain, by)
    if changed:
        invalidate_dashboard(ctx)
    return changed
