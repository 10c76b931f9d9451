"""Campaigns in MongoDB (``campaigns``, unique ``name``): save, read, list, remove."""

from __future__ import annotations

from datetime import UTC, datetime

from pymongo import ASCENDING
from pymongo.errors import DuplicateKeyError

from ..context import Context
from .definition import Campaign, CampaignError, check_seeds
from .lock import CampaignBusy, lock_holder


def save_campaign(ctx: Context, campaign: Campaign, replace: bool = False) -> str:
    """Store a campaign after checking its seeds; returns "added", "updated" or "unchanged".

    Without ``replace`` an existing name is an error.
    """
    check_seeds(campaign, ctx.settings.allow_private_networks)
    now = datetime.now(UTC)
    doc = campaign.to_doc()
    existing = ctx.db.campaigns.find_one({"name": campaign.name})
    if existing is None:
        try:
            ctx.db.campaigns.insert_one({**doc, "created_at": now, "updated_at": now})
        except DuplicateKeyError:
            existing = ctx.db.campaigns.find_one({"name": campaign.name})
        else:
            return "added"
    if not replace:
        raise CampaignError(f"campaign {campaign.name!r} exists; `campaign import` replaces it")
    if existing is not None and Campaign.from_dict(existing) == campaign:
        return "unchanged"
    ctx.db.campaigns.update_one({"name": campaign.name}, {"$set": {**doc, "updated_at": now}})
    return "updated"


def get_campaign(ctx: Context, name: str) -> Campaign:
    doc = ctx.db.campaigns.find_one({"name": name})
    if doc is None:
        raise CampaignError(f"no campaign named {name!r} (`copytrack campaign list` shows them)")
    return Campaign.from_dict(doc)


def list_campaigns(ctx: Context) -> list[Campaign]:
    return [Campaign.from_dict(doc) for doc in ctx.db.campaigns.find().sort("name", ASCENDING)]


def remove_campaign(ctx: Context, name: str) -> None:
    """Delete a campaign (its runs and findings stay as history); refused while it runs."""
    get_campaign(ctx, name)
    holder = lock_holder(ctx, name)
    if holder is not None:
        raise CampaignBusy(name, holder)
    ctx.db.campaigns.delete_one({"name": name})
