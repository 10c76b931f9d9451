"""Sites discovery found copying works, proposed as the seeds of new campaigns: those with
findings on pages a discover campaign crawled, which no sites campaign crawls yet and which
are not licensed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from ..campaigns.store import list_campaigns
from ..context import Context
from ..findings.status import NOT_COPIES
from .searches import known_site


@dataclass(frozen=True)
class ProposedSite:
    site: str  # host[:port]
    findings: int
    works: int
    example_url: str  # a page of it with a finding
    last_seen: datetime

    @property
    def seed(self) -> str:
        """The site's home page, a new campaign's first seed."""
        scheme = urlsplit(self.example_url).scheme or "https"
        return f"{scheme}://{self.site}/"

    @property
    def campaign_name(self) -> str:
        """A name for its campaign ("pirate.example:8080" → "pirate.example-8080")."""
        return self.site.replace(":", "-").strip("[]")[:64]


def proposed_sites(
    ctx: Context, campaign: str | None = None, limit: int = 100
) -> list[ProposedSite]:
    """Sites found by the discover campaigns (or ``campaign`` alone), most findings first."""
    discovering = [c.name for c in list_campaigns(ctx) if c.kind == "discover"]
    if campaign is not None:
        discovering = [name for name in discovering if name == campaign]
    known = known_site(ctx)
    groups = ctx.db.findings.aggregate([
        {"$match": {"campaign": {"$in": discovering}, "status": {"$nin": list(NOT_COPIES)}}},
        {"$group": {"_id": "$site", "findings": {"$sum": 1},
                    "works": {"$addToSet": "$master_external_id"},
                    "example": {"$first": "$url"}, "last_seen": {"$max": "$last_seen"}}},
        {"$sort": {"findings": -1, "_id": 1}},
    ])  # fmt: skip
    found = []
    for group in groups:
        site = group["_id"] or ""
        if not site or known(site):
            continue
        found.append(ProposedSite(site, group["findings"], len(group["works"]),
                                  group["example"], group["last_seen"]))  # fmt: skip
        if len(found) == limit:
            break
    return found
