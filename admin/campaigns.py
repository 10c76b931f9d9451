"""The admin's seam to crawl campaigns (``tracker.campaigns``): forms in, figures out.

tracker.campaigns validates and stores campaigns (cron schedule, seeds on private
networks refused unless allowed, patterns) and starts runs; this module only turns a
submitted form into its input, its errors into per-field messages, and runs into the
figures the pages show.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from croniter import croniter

from tracker import campaigns as tracker_campaigns
from tracker.campaigns import ACTIVE_STATES, STOPPABLE_STATES, Campaign, CampaignError
from tracker.campaigns.outcomes import (
    Health,
    ProblemPage,
    outcome_counts,
    problem_page,
    run_health,
)
from tracker.context import Context
from tracker.discovery.proposals import ProposedSite, proposed_sites
from tracker.monitoring.heartbeats import has_worker

from .i18n import gettext

#: Form fields holding one item per line.
LIST_FIELDS = ("seeds", "allowed_domains", "allow", "deny")
#: Numeric form fields; empty means "no limit" or "the crawler's default".
NUMBER_FIELDS = {
    "max_pages": int,
    "max_depth": int,
    "delay": float,
    "concurrency": int,
    "refetch_days": float,
    "sample": int,
}
FORM_FIELDS = (
    "name",
    "kind",
    *LIST_FIELDS,
    *NUMBER_FIELDS,
    "schedule",
    "enabled",
    "render",
    "ocr",
    "notes",
)


class FormError(ValueError):
    """A campaign form that cannot be saved; ``problems`` maps field names to reasons."""

    def __init__(self, problems: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in problems.items()))
        self.problems = problems


def _field_of(err: CampaignError) -> str:
    """tracker.campaigns names the field first ("seeds: …"); the message goes next to it."""
    field, _, _ = str(err).partition(":")
    return field if field in FORM_FIELDS else "name"


def parse_form(form: Mapping[str, str]) -> Campaign:
    """The campaign a submitted form describes; raises FormError per field."""
    data: dict[str, Any] = {"name": (form.get("name") or "").strip()}
    for name in LIST_FIELDS:
        data[name] = [line.strip() for line in (form.get(name) or "").splitlines() if line.strip()]
    problems = {}
    for name, kind in NUMBER_FIELDS.items():
        raw = (form.get(name) or "").strip()
        try:
            data[name] = kind(raw) if raw else None
        except ValueError:
            problems[name] = "give a number, or leave it empty"
    for name in ("refetch_days", "sample"):
        if data[name] is None:
            del data[name]  # tracker's default
    data["kind"] = (form.get("kind") or "sites").strip()
    data["schedule"] = (form.get("schedule") or "").strip() or None
    data["enabled"] = form.get("enabled") in ("on", "true", "1")
    data["render"] = form.get("render") in ("on", "true", "1")
    data["ocr"] = form.get("ocr") in ("on", "true", "1")
    data["notes"] = (form.get("notes") or "").strip()
    # tracker.campaigns stops at the first bad field: each one found is set aside (a valid
    # stand-in, never stored) and the rest checked again, so the form lists them all.
    for _attempt in FORM_FIELDS:
        try:
            campaign = Campaign.from_dict(data)
        except CampaignError as err:
            field = _field_of(err)
            if field in problems:  # a stand-in that does not help: report what we have
                break
            problems[field] = str(err)
            data[field] = _STAND_INS.get(field, lambda _kind: None)(data.get("kind"))
            if data[field] is None:
                del data[field]
        else:
            if not problems:
                return campaign
            break
    raise FormError(problems)


#: A valid value for a field found bad, so that the fields after it are checked too.
_STAND_INS = {
    "name": lambda _kind: "checked",
    "kind": lambda _kind: "sites",
    "seeds": lambda kind: [] if kind == "discover" else ["http://example.com/"],
    "allowed_domains": lambda _kind: [],
    "allow": lambda _kind: [],
    "deny": lambda _kind: [],
}


def as_form(campaign: Campaign | None, proposed: Mapping[str, str] | None = None) -> dict[str, str]:
    """A campaign as the strings of its form fields (a new campaign's defaults for None,
    with the ``name`` and ``seeds`` a proposal gives)."""
    if campaign is None:
        values = {"max_pages": str(Campaign.max_pages), "enabled": "on", "kind": "sites",
                  "sample": str(Campaign.sample)}  # fmt: skip
        proposed = proposed or {}
        values.update({key: proposed[key] for key in ("name", "seeds") if proposed.get(key)})
        return values
    values = {}
    for name, value in campaign.to_doc().items():
        if isinstance(value, list):
            value = "\n".join(value)
        elif isinstance(value, bool):
            value = "on" if value else ""
        values[name] = "" if value is None else str(value)
    return values


def save(ctx: Context, campaign: Campaign, is_new: bool) -> None:
    """Store a campaign (seeds checked against the private-network rule); FormError if not."""
    try:
        tracker_campaigns.save_campaign(ctx, campaign, replace=not is_new)
    except CampaignError as err:
        raise FormError({_field_of(err): str(err)}) from None


def get(ctx: Context, name: str) -> Campaign | None:
    try:
        return tracker_campaigns.get_campaign(ctx, name)
    except CampaignError:
        return None


def overview(ctx: Context) -> list[tuple[Campaign, dict[str, Any] | None]]:
    """Every campaign with its latest run (or None)."""
    return [
        (campaign, next(iter(tracker_campaigns.run_history(ctx, campaign.name, 1)), None))
        for campaign in tracker_campaigns.list_campaigns(ctx)
    ]


def history(ctx: Context, name: str, limit: int = 50) -> list[dict[str, Any]]:
    return tracker_campaigns.run_history(ctx, name, limit)


def figures(run: Mapping[str, Any]) -> dict[str, int]:
    """A run's counters for display: pages fetched/changed, skipped, failed, new findings."""
    pages = run.get("pages") or {}
    found = run.get("findings") or {}
    return {
        "fetched": pages.get("fetched", 0),
        "changed": pages.get("changed", 0),
        "skipped": sum((run.get("skipped") or {}).values()),
        "failed": sum((run.get("failed") or {}).values()),
        "new findings": found.get("new", 0),
    }


def get_run(ctx: Context, run_id: str) -> dict[str, Any] | None:
    """The run, or None; an active one is failed first if its crawl died (a cheap check).
    A scanning run is moved on by the scheduler and the workers, not here: counting its
    unscanned pages at every poll of every open page would cost a query over all of them."""
    try:
        run = tracker_campaigns.get_run(ctx, run_id)
    except CampaignError:
        return None
    if run["state"] in ACTIVE_STATES:
        run = tracker_campaigns.refresh_run(ctx, run["_id"])
    return run


def health_message(health: Health) -> str:
    """Why a run is green, amber or red, in the request's language."""
    if not health.values:
        return gettext(health.text)
    # The reason is a sentence of its own (tracker.campaigns.outcomes.REASONS).
    values = {name: gettext(value) for name, value in health.values.items()}
    return gettext(health.text) % values


def waiting_for_worker(ctx: Context, run: Mapping[str, Any]) -> str | None:
    """Why the run cannot go on, when it waits for a worker that no one runs: a queued
    run for a crawler worker, a crawling or scanning one for a scan worker."""
    state = run["state"]
    if state == "queued" and not has_worker(ctx, "crawl"):
        return gettext(
            "This run waits for a crawler worker, and none is running: start one "
            "(copytrack worker, or copytrack up)."
        )
    if state in ("starting", "running", "scanning") and not has_worker(ctx, "scan"):
        return gettext(
            "No worker is running: the pages of this run wait to be scanned. Start one "
            "(copytrack worker, or copytrack up)."
        )
    return None


def progress(run: Mapping[str, Any], ctx: Context | None = None) -> dict[str, Any]:
    """What the pages update while a run goes (JSON): state, health, figures, counts, and
    (given ``ctx``) whether it waits for a worker that is not running."""
    health = run_health(run)
    return {
        "waiting": waiting_for_worker(ctx, run) if ctx is not None else None,
        "stoppable": run["state"] in STOPPABLE_STATES,
        "id": str(run["_id"]),
        "state": run["state"],
        "done": run["state"] in tracker_campaigns.DONE_STATES,
        "health": {"level": health.level, "message": health_message(health)},
        "figures": figures(run),
        "counts": outcome_counts(run),
        "error": run.get("error"),
    }


def problems(
    ctx: Context, run: Mapping[str, Any], outcome: str | None, reason: str | None, page: int
) -> ProblemPage:
    return problem_page(ctx, run["_id"], outcome or None, reason or None, page)


def proposals(ctx: Context, campaign: str) -> list[ProposedSite]:
    """The sites a discover campaign found copying works, not yet crawled by a campaign."""
    return proposed_sites(ctx, campaign)


def next_runs(schedule: str | None, count: int = 3) -> list[datetime]:
    """The next times a cron schedule fires (UTC)."""
    if not schedule:
        return []
    it = croniter(schedule, datetime.now(UTC))
    return [it.get_next(datetime) for _ in range(count)]


def stop(ctx: Context, name: str, by: str) -> dict[str, Any]:
    """Stop campaign ``name``'s run under way, on behalf of user ``by``; returns the run.

    Raises LookupError for an unknown campaign and ``tracker.campaigns.NotRunning`` (a
    CampaignError) when no run of it is under way.
    """
    if get(ctx, name) is None:
        raise LookupError(f"no campaign {name!r}")
    return tracker_campaigns.stop_run(ctx, name, by)


def trigger(ctx: Context, name: str) -> Any:
    """Start a run of campaign ``name`` now; returns the run id.

    Raises LookupError for an unknown campaign and ``tracker.campaigns.CampaignBusy``
    (a RuntimeError) when it is running already.
    """
    if get(ctx, name) is None:
        raise LookupError(f"no campaign {name!r}")
    return tracker_campaigns.trigger_run(ctx, name)
