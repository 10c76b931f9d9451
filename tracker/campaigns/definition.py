"""What a campaign is: its definition, checked field by field, and campaign files (YAML).

A campaign says what to crawl: seeds (pages, sitemaps, RSS/Atom feeds), allowed domains,
allow/deny URL patterns, depth and page limits, politeness overrides, a cron schedule
(UTC). Seeds pass the same private-network rule as every crawled URL (tracker.core.netguard).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from croniter import croniter

from ..core.jsonl import not_regular
from ..core.netguard import check_url

# Letters of any script (盗版小说站 is a name), digits, '_', '.', '-'; no spaces or slashes:
# names go into addresses and keys.
_NAME = re.compile(r"^[^\W_][\w.-]{0,63}$")
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
# host name, IPv4 address or bracketed IPv6 address, then an optional port
_DOMAIN = re.compile(rf"^(?:{_LABEL}(?:\.{_LABEL})*|\[[0-9a-f:.]+\])(?::\d{{1,5}})?$")


#: What a campaign crawls: the sites it lists, or what a search engine finds.
KINDS = ("sites", "discover")


class CampaignError(ValueError):
    """A campaign definition or file is invalid, or names no stored campaign."""


@dataclass(frozen=True)
class Campaign:
    """What to crawl and how politely; validated by :meth:`from_dict`."""

    name: str
    seeds: tuple[str, ...]
    allowed_domains: tuple[str, ...] = ()  # empty: the seeds' host[:port]s
    allow: tuple[str, ...] = ()  # regexes a followed URL must match (one of)
    deny: tuple[str, ...] = ()  # regexes no followed URL may match
    max_depth: int | None = None  # link hops from a seed; None: unlimited
    max_pages: int | None = 10_000
    schedule: str | None = None  # cron expression, UTC
    enabled: bool = True
    delay: float | None = None  # seconds between requests to one site (None: crawler default)
    concurrency: int | None = None  # parallel requests to one site (None: crawler default)
    refetch_days: float = 0.0  # a page fetched more recently is not fetched again
    render: bool = False  # run each page's scripts in a browser before reading its text
    ocr: bool = False  # read the text of the images of each page's article (extractor.ocr)
    kind: str = "sites"  # "discover": its seeds are search results (tracker.discovery)
    sample: int = 20  # discover: works whose sentences one run looks up
    notes: str = ""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Campaign:
        """Validate a campaign given as a mapping (CLI options, YAML, JSON, MongoDB)."""
        if not isinstance(data, Mapping):
            raise CampaignError(f"a campaign must be a mapping of fields, not {_kind(data)}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"_id", "created_at", "updated_at",
                                              "last_scheduled_at"})  # fmt: skip
        if unknown:
            raise CampaignError(
                f"unknown field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(known))}"
            )
        name = data.get("name")
        if not isinstance(name, str) or not _NAME.match(name):
            raise CampaignError(
                f"name: {name!r} is not a valid name (1-64 letters, 汉字 too, digits, '_', '.', "
                "'-', starting with a letter or digit)"
            )
        values: dict[str, Any] = {"name": name}
        kind = data.get("kind") or "sites"
        if kind not in KINDS:
            raise CampaignError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
        values["kind"] = kind
        values["seeds"] = tuple(_seed(s) for s in _strings(data, "seeds"))
        if kind == "sites" and not values["seeds"]:
            raise CampaignError("seeds: give at least one seed URL (page, sitemap or feed)")
        if kind == "discover" and values["seeds"]:
            raise CampaignError(
                "seeds: a discover campaign finds its own (search results); leave them out, "
                "or make it a sites campaign"
            )
        values["sample"] = _number(data, "sample", int, 1, cls.sample)
        values["allowed_domains"] = tuple(_domain(d) for d in _strings(data, "allowed_domains"))
        for key in ("allow", "deny"):
            values[key] = tuple(_regex(key, p) for p in _strings(data, key))
        values["max_depth"] = _number(data, "max_depth", int, 0, cls.max_depth)
        if kind == "discover":  # the results' pages, and at most the pages they link to
            depth = values["max_depth"]
            if depth is not None and depth > 1:
                raise CampaignError(
                    "max_depth: a discover campaign crawls its results to depth 0 or 1"
                )
            values["max_depth"] = depth or 0
        values["max_pages"] = _number(data, "max_pages", int, 1, cls.max_pages)
        values["delay"] = _number(data, "delay", float, 0, None)
        values["concurrency"] = _number(data, "concurrency", int, 1, None)
        values["refetch_days"] = _number(data, "refetch_days", float, 0, cls.refetch_days)
        schedule = data.get("schedule")
        if schedule is not None:
            if not isinstance(schedule, str) or not croniter.is_valid(schedule):
                raise CampaignError(
                    f"schedule: {schedule!r} is not a cron expression "
                    "(five fields, e.g. '0 3 * * *' for 03:00 UTC daily)"
                )
            values["schedule"] = schedule.strip()
        for key, default in (("enabled", True), ("render", False), ("ocr", False)):
            flag = data.get(key, default)
            if not isinstance(flag, bool):
                raise CampaignError(f"{key}: expected true or false, got {flag!r}")
            values[key] = flag
        notes = data.get("notes") or ""
        if not isinstance(notes, str):
            raise CampaignError("notes: expected text")
        values["notes"] = notes
        return cls(**values)

    def with_seeds(self, seeds: list[str]) -> Campaign:
        """This discover campaign crawling ``seeds`` (its search results), on their sites."""
        sites = tuple(dict.fromkeys(urlsplit(seed).netloc.lower() for seed in seeds))
        return replace(self, seeds=tuple(seeds), allowed_domains=sites)

    def domains(self) -> tuple[str, ...]:
        """The allowed domains, or the seeds' ``host[:port]`` when none are given."""
        if self.allowed_domains:
            return self.allowed_domains
        return tuple(dict.fromkeys(urlsplit(seed).netloc.lower() for seed in self.seeds))

    def to_doc(self) -> dict[str, Any]:
        """The fields as stored in MongoDB (tuples become lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _kind(value: object) -> str:
    return type(value).__name__


def _strings(data: Mapping[str, Any], key: str) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise CampaignError(f"{key}: expected a list of strings, got {value!r}")
    return [v.strip() for v in value if v.strip()]


def _seed(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CampaignError(f"seeds: {url!r} is not an http(s) URL with a host")
    return url


def _domain(domain: str) -> str:
    domain = domain.lower().rstrip(".")
    if not _DOMAIN.match(domain):
        raise CampaignError(
            f"allowed_domains: {domain!r} is not a host name or host:port (no scheme, no path)"
        )
    return domain


def _regex(key: str, pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as err:
        raise CampaignError(
            f"{key}: {pattern!r} is not a valid regular expression: {err}"
        ) from None
    return pattern


def _number(data: Mapping[str, Any], key: str, kind: type, minimum: float, default: Any) -> Any:
    value = data.get(key, default)
    if value is None:
        return None
    # bool is an int subclass: `max_pages: yes` in YAML must not mean 1.
    ok = not isinstance(value, bool) and isinstance(value, int | float if kind is float else int)
    if not ok or value < minimum:
        what = "a whole number" if kind is int else "a number"
        raise CampaignError(f"{key}: expected {what} ≥ {minimum:g}, got {value!r}")
    return kind(value)


def check_seeds(campaign: Campaign, allow_private: bool) -> None:
    """Refuse seeds on private or loopback addresses unless private networks are allowed."""
    for seed in campaign.seeds:
        try:
            check_url(seed, allow_private)
        except OSError as err:
            raise CampaignError(f"seeds: cannot resolve {seed}: {err}") from None
        except ValueError as err:
            raise CampaignError(f"seeds: {seed} refused: {err}") from None


def load_campaign_file(path: Path) -> list[Campaign]:
    """Campaigns from a YAML or JSON file: one mapping, a list, or ``{campaigns: [...]}``.

    Raises CampaignError naming the file, and the campaign and field at fault.
    """
    if problem := not_regular(path):
        raise CampaignError(f"{path}: {problem}: give a YAML or JSON file")
    try:
        raw = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise CampaignError(f"{path}: cannot read: {err}") from None
    try:
        data = json.loads(raw) if path.suffix.lower() == ".json" else yaml.safe_load(raw)
    except json.JSONDecodeError as err:
        raise CampaignError(f"{path}: not valid JSON (line {err.lineno}, column {err.colno}): "
                            f"{err.msg}") from None  # fmt: skip
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise CampaignError(f"{path}: not valid YAML{where}: {problem}") from None
    if isinstance(data, Mapping) and "campaigns" in data:
        data = data["campaigns"]
    items = [data] if isinstance(data, Mapping) else data
    if not isinstance(items, list) or not items:
        raise CampaignError(
            f"{path}: expected a campaign, a list of campaigns or {{campaigns: [...]}}, "
            f"got {_kind(data)}"
        )
    campaigns, names = [], set()
    for n, item in enumerate(items, start=1):
        label = item.get("name") if isinstance(item, Mapping) else None
        try:
            campaign = Campaign.from_dict(item)
        except CampaignError as err:
            raise CampaignError(f"{path}: campaign #{n} ({label or 'no name'}): {err}") from None
        if campaign.name in names:
            raise CampaignError(f"{path}: campaign #{n}: name {campaign.name!r} appears twice")
        names.add(campaign.name)
        campaigns.append(campaign)
    return campaigns
