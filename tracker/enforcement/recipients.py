"""Whom a takedown notice goes to: the proposals a reviewer picks from.

- the registrar's abuse contact (RDAP of the finding's domain);
- the hosting network's abuse contact (RDAP of the address the page came from at capture);
- the site's own contact, where its captured pages name one (``mailto:`` links, addresses
  on the site's own domain);
- addresses the reviewer adds.

The RDAP answers are kept on the findings (``rdap``), so the finding shows whom copytrack
proposed and why.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from ..context import Context
from ..core.store import changed
from ..findings.captures import page_capture
from ..findings.notices import EMAIL_ADDRESS
from .rdap import RdapAnswer, lookup_domain, lookup_ip

__all__ = ["HOSTING", "REGISTRAR", "REVIEWER", "SITE", "Recipient", "propose_recipients"]

REGISTRAR, HOSTING, SITE, REVIEWER = "registrar", "hosting", "site", "reviewer"
SOURCE_LABELS = {
    REGISTRAR: "Registrar's abuse contact (RDAP)",
    HOSTING: "Hosting network's abuse contact (RDAP)",
    SITE: "The site's own contact",
    REVIEWER: "Added by the reviewer",
}
#: Captures of a domain read for its own contact addresses.
PAGES_READ = 5
_MAILTO = re.compile(rb"mailto:([^\"'>?\s]+)", re.IGNORECASE)
_ADDRESS = re.compile(rb"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")


@dataclass(frozen=True)
class Recipient:
    """A proposed address, where it comes from, and what says so (the RDAP URL, a page)."""

    email: str
    source: str
    detail: str = ""


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _site_contacts(ctx: Context, domain: str, page_ids: list[Any]) -> list[Recipient]:
    found: dict[str, Recipient] = {}
    fields = {"raw_zlib": 1, "raw_file": 1, "url": 1}
    for page in ctx.db.pages.find({"_id": {"$in": page_ids[:PAGES_READ]}}, fields):
        raw = page_capture(ctx, page) or b""
        named = [m.group(1) for m in _MAILTO.finditer(raw)]
        named += [m.group(0) for m in _ADDRESS.finditer(raw)
                  if m.group(0).lower().endswith(domain.encode().lower())]  # fmt: skip
        for value in named:
            email = value.decode("utf-8", "replace").strip().lower()
            if EMAIL_ADDRESS.fullmatch(email) and email not in found:
                found[email] = Recipient(email, SITE, page["url"])
    return list(found.values())


def rdap_of(ctx: Context, domain: str, address: str | None) -> list[RdapAnswer]:
    """The registrar's and the hosting network's answers for a domain and its address."""
    answers = [] if _is_address(domain) else [lookup_domain(ctx, domain)]
    if address:
        answers.append(lookup_ip(ctx, address))
    elif _is_address(domain):
        answers.append(lookup_ip(ctx, domain))
    return answers


def propose_recipients(
    ctx: Context, findings: list[dict[str, Any]]
) -> tuple[list[Recipient], list[RdapAnswer]]:
    """The addresses to propose for a notice of ``findings`` (one domain), best first, and
    the RDAP answers behind them (kept on the findings)."""
    if not findings:
        return [], []
    domain = findings[0]["domain"]
    pages = {f["page_id"] for f in findings}
    ips = ctx.db.pages.distinct("ip", {"_id": {"$in": list(pages)[:50]}})
    address = next((ip for ip in ips if ip), None)
    answers = rdap_of(ctx, domain, address)
    proposed: dict[str, Recipient] = {}
    for answer in answers:
        source = REGISTRAR if answer.kind == "domain" else HOSTING
        for email in answer.abuse:
            proposed.setdefault(email, Recipient(email, source, answer.url))
    for recipient in _site_contacts(ctx, domain, [f["page_id"] for f in findings]):
        proposed.setdefault(recipient.email, recipient)
    kept = [answer.as_doc() for answer in answers]
    ctx.db.findings.update_many(
        {"_id": {"$in": [f["_id"] for f in findings]}}, changed({"$set": {"rdap": kept}})
    )
    return list(proposed.values()), answers
