"""Alert subscriptions: who is told (e-mail addresses, or a webhook URL with its secret),
about what (events, narrowed by campaign, works, domain, score, copied characters), how
often (at once, an hourly or a daily digest) and in which language.

A webhook's secret is stored to sign its requests and never given back: what lists and
pages show is ``public()``, which says only that one is set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, TypedDict, Unpack

from bson import ObjectId
from pymongo.errors import DuplicateKeyError

from ..context import Context
from ..core.times import now
from ..findings.notices import EMAIL_ADDRESS

__all__ = [
    "EVENTS",
    "EVENT_LABELS",
    "FREQUENCIES",
    "SubscriptionError",
    "add_subscription",
    "get_subscription",
    "list_subscriptions",
    "public",
    "remove_subscription",
    "update_subscription",
]

NEW, CONFIRMED, OVERDUE, STILL_THERE, RUN_FAILED = (
    "new", "confirmed", "overdue", "still_there", "run_failed"
)  # fmt: skip
#: What a subscription can be told about, with its label.
EVENT_LABELS: dict[str, str] = {
    NEW: "New findings",
    CONFIRMED: "Confirmed findings",
    OVERDUE: "Notices past their deadline",
    STILL_THERE: "Copies still there after the deadline",
    RUN_FAILED: "Crawl runs that failed",
}
EVENTS: tuple[str, ...] = tuple(EVENT_LABELS)
#: How often a subscription is sent its alerts: seconds between two deliveries at least.
FREQUENCIES: dict[str, int] = {"now": 0, "hour": 3600, "day": 86400}
LANGUAGES = ("en", "zh")
MAX_EMAILS = 20
_NAME = re.compile(r"[\w][\w .@-]{0,63}")
_FILTERS = ("campaign", "works", "domain", "min_score", "min_chars")


class SubscriptionError(ValueError):
    """A subscription that cannot be stored as given, with what to change."""


def _emails(emails: Iterable[str]) -> list[str]:
    found = list(dict.fromkeys(e.strip() for e in emails if e.strip()))
    for email in found:
        if not EMAIL_ADDRESS.fullmatch(email):
            raise SubscriptionError(f"{email!r} is not an e-mail address (name@example.org)")
    if len(found) > MAX_EMAILS:
        raise SubscriptionError(f"at most {MAX_EMAILS} addresses a subscription")
    return found


def _webhook(url: str | None, secret: str | None) -> tuple[str | None, str | None]:
    if not url:
        if secret:
            raise SubscriptionError("a secret goes with a webhook URL (--webhook URL)")
        return None, None
    url = url.strip()
    if not re.fullmatch(r"https?://[^\s/?#]+[^\s]*", url):
        raise SubscriptionError(f"{url!r} is not a webhook URL: give http(s)://host/path")
    if not secret or not secret.strip():
        raise SubscriptionError(
            "a webhook needs a secret (--secret): its requests are signed with it so the "
            "receiver can tell them from forgeries"
        )
    return url, secret.strip()


class Fields(TypedDict, total=False):
    """What a subscription holds besides its name (``_checked`` gives the defaults)."""

    emails: Iterable[str]
    webhook: str | None
    secret: str | None
    when: Iterable[str]
    every: str
    lang: str
    campaign: str | None
    works: Iterable[str]
    domain: str | None
    min_score: float | None
    min_chars: int | None


def add_subscription(
    ctx: Context, name: str, *, by: str = "copytrack", **fields: Unpack[Fields]
) -> dict[str, Any]:
    """Store a subscription; returns it as ``public()`` shows it. SubscriptionError naming
    what is wrong (a name taken, no or two channels, an unknown event…)."""
    doc = _checked(name, **fields)
    doc.update(created_at=now(), by=by, last_batch_at=None)
    try:
        doc["_id"] = ctx.db.subscriptions.insert_one(doc).inserted_id
    except DuplicateKeyError:
        raise SubscriptionError(
            f"a subscription named {name!r} exists: remove it first or choose another name"
        ) from None
    return public(doc)


def update_subscription(
    ctx: Context, subscription_id: ObjectId, *, secret: str | None = None, **fields: Any
) -> dict[str, Any]:
    """Change a subscription (the fields of ``add_subscription``); a webhook keeps its
    secret unless a new one is given. What it was alerted about stays alerted."""
    old = ctx.db.subscriptions.find_one({"_id": subscription_id})
    if old is None:
        raise SubscriptionError("no such subscription: it was removed meanwhile")
    if fields.get("webhook") and not secret:
        secret = old.get("secret")
    doc = _checked(fields.pop("name"), secret=secret, **fields)
    try:
        ctx.db.subscriptions.update_one({"_id": subscription_id}, {"$set": doc})
    except DuplicateKeyError:
        raise SubscriptionError(f"a subscription named {doc['name']!r} exists already") from None
    return public({**old, **doc})


def _checked(
    name: str,
    *,
    emails: Iterable[str] = (),
    webhook: str | None = None,
    secret: str | None = None,
    when: Iterable[str] = (NEW,),
    every: str = "now",
    lang: str = "en",
    campaign: str | None = None,
    works: Iterable[str] = (),
    domain: str | None = None,
    min_score: float | None = None,
    min_chars: int | None = None,
) -> dict[str, Any]:
    """The subscription's fields, each checked; SubscriptionError naming what is wrong."""
    name = name.strip()
    if not _NAME.fullmatch(name):
        raise SubscriptionError(
            f"{name!r} is no subscription name: up to 64 letters, digits, spaces, '.', '@', "
            "'-' or '_'"
        )
    addresses = _emails(emails)
    url, key = _webhook(webhook, secret)
    if bool(addresses) == bool(url):
        raise SubscriptionError(
            "a subscription goes to e-mail addresses (--email ADDR …) or to one webhook "
            "(--webhook URL --secret S), not both and not neither"
        )
    events = list(dict.fromkeys(when)) or [NEW]
    unknown = [e for e in events if e not in EVENTS]
    if unknown:
        raise SubscriptionError(f"unknown event {unknown[0]!r}: use {', '.join(EVENTS)}")
    if every not in FREQUENCIES:
        raise SubscriptionError(f"unknown frequency {every!r}: use {', '.join(FREQUENCIES)}")
    if lang not in LANGUAGES:
        raise SubscriptionError(f"unknown language {lang!r}: use {' or '.join(LANGUAGES)}")
    if min_score is not None and not 0 <= min_score <= 1:
        raise SubscriptionError("the minimum score is a fraction from 0 to 1 (0.5 = 50%)")
    if min_chars is not None and min_chars < 0:
        raise SubscriptionError("the minimum copied characters cannot be negative")
    doc: dict[str, Any] = {
        "name": name,
        "emails": addresses,
        "webhook": url,
        "secret": key,
        "when": events,
        "every": every,
        "lang": lang,
        "campaign": (campaign or "").strip() or None,
        "works": [w.strip() for w in works if w.strip()],
        "domain": (domain or "").strip().lower() or None,
        "min_score": min_score,
        "min_chars": min_chars,
    }
    return doc


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """A subscription as it may be shown: the secret replaced by whether one is set."""
    shown = {k: v for k, v in doc.items() if k != "secret"}
    shown["secret_set"] = bool(doc.get("secret"))
    return shown


def get_subscription(ctx: Context, subscription_id: ObjectId) -> dict[str, Any] | None:
    """The stored subscription, secret included (for signing, never for showing)."""
    return ctx.db.subscriptions.find_one({"_id": subscription_id})


def list_subscriptions(ctx: Context) -> list[dict[str, Any]]:
    """Every subscription by name, as ``public()`` shows it."""
    return [public(doc) for doc in ctx.db.subscriptions.find().sort("name", 1)]


def remove_subscription(ctx: Context, name: str) -> bool:
    """Remove the subscription ``name`` (its delivery log stays); False when there is none."""
    return ctx.db.subscriptions.delete_one({"name": name.strip()}).deleted_count == 1


def describe_filters(doc: dict[str, Any]) -> str:
    """What a subscription is narrowed to, in one line ("" when it takes everything)."""
    parts = []
    for name in _FILTERS:
        value = doc.get(name)
        if value:
            parts.append(f"{name} {','.join(value) if isinstance(value, list) else value}")
    return "; ".join(parts)
