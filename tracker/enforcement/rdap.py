"""RDAP (RFC 9082/9083): who registered a domain and who runs an address's network, and
their abuse contacts.

Which registry answers for what is read from IANA's bootstrap files (RFC 9224:
``dns.json``, ``ipv4.json``, ``ipv6.json`` under COPYTRACK_RDAP_BOOTSTRAP_URL), cached a
day; each registry's answer is cached a week (MongoDB ``rdap_cache``), so preparing a
hundred notices for one host asks once. Lookups happen only when a reviewer prepares a
notice; nothing is looked up on copytrack's own.
"""

from __future__ import annotations

import ipaddress
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from ..context import Context
from ..core.times import now as utc_now

__all__ = ["RdapAnswer", "RdapError", "abuse_emails", "lookup_domain", "lookup_ip"]

TIMEOUT = 15.0
MAX_ANSWER = 2 * 1024 * 1024
BOOTSTRAP_TTL = timedelta(days=1)
ANSWER_TTL = timedelta(days=7)
#: Labels dropped at most from a host name looking for its registered domain
#: (www.news.pirate.example → news.pirate.example → pirate.example).
DOMAIN_TRIES = 3
USER_AGENT = "copytrack/0.1 (rdap)"


class RdapError(RuntimeError):
    """A registry or the bootstrap file could not be asked, or answered no RDAP JSON."""


@dataclass(frozen=True)
class RdapAnswer:
    """What a registry said of a domain or an address, as kept on a finding."""

    kind: str  # "domain" or "ip"
    query: str  # the name or address asked
    url: str  # the RDAP URL that answered ("" when no registry answers for it)
    name: str = ""  # the domain's ldhName, or the network's name
    abuse: list[str] = field(default_factory=list)
    error: str = ""
    at: datetime | None = None

    def as_doc(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "query": self.query, "url": self.url, "name": self.name,
            "abuse": self.abuse, "error": self.error, "at": self.at,
        }  # fmt: skip


def _get_json(url: str) -> dict[str, Any] | None:
    """The JSON object at ``url``; None for a 404 (nothing registered); RdapError else."""
    request = urllib.request.Request(
        url, headers={"Accept": "application/rdap+json, application/json", "User-Agent": USER_AGENT}
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            body = answer.read(MAX_ANSWER + 1)
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise RdapError(f"{url} answered HTTP {err.code} {err.reason}") from None
    except (urllib.error.URLError, OSError) as err:
        raise RdapError(f"{url} cannot be reached: {getattr(err, 'reason', err)}") from None
    if len(body) > MAX_ANSWER:
        raise RdapError(f"{url} answered more than {MAX_ANSWER // 2**20} MB")
    try:
        doc = json.loads(body)
    except ValueError:
        raise RdapError(f"{url} did not answer JSON") from None
    if not isinstance(doc, dict):
        raise RdapError(f"{url} answered JSON that is no RDAP object")
    return doc


def _cached(ctx: Context, key: str, url: str, ttl: timedelta) -> dict[str, Any] | None:
    """The answer at ``url``, from the cache while younger than ``ttl``."""
    at = utc_now()
    hit = ctx.db.rdap_cache.find_one({"_id": key})
    if hit and hit["fetched_at"] > at - ttl and hit.get("url") == url:
        return json.loads(hit["answer"]) if hit.get("answer") else None
    doc = _get_json(url)
    # Stored as text: RDAP keys may hold characters MongoDB refuses in field names.
    answer = json.dumps(doc) if doc is not None else None
    ctx.db.rdap_cache.replace_one(
        {"_id": key}, {"url": url, "fetched_at": at, "answer": answer}, upsert=True
    )
    return doc


def _services(ctx: Context, kind: str) -> list[tuple[list[str], list[str]]]:
    base = ctx.settings.rdap_bootstrap_url or ""
    url = urllib.parse.urljoin(base if base.endswith("/") else base + "/", f"{kind}.json")
    doc = _cached(ctx, f"bootstrap:{kind}", url, BOOTSTRAP_TTL)
    services = (doc or {}).get("services")
    if not isinstance(services, list):
        raise RdapError(f"{url} is no RDAP bootstrap file (no services)")
    return [(s[0], s[1]) for s in services if isinstance(s, list) and len(s) >= 2]


def _https_first(urls: list[str]) -> str:
    return sorted(urls, key=lambda u: not u.startswith("https://"))[0]


def registry_for_domain(services: list[tuple[list[str], list[str]]], name: str) -> str | None:
    """The RDAP base URL answering for ``name``: the longest matching label suffix."""
    labels = name.lower().rstrip(".").split(".")
    for n in range(len(labels)):
        suffix = ".".join(labels[n:])
        for entries, urls in services:
            if suffix in entries and urls:
                return _https_first(urls)
    return None


def registry_for_ip(services: list[tuple[list[str], list[str]]], address: str) -> str | None:
    """The RDAP base URL answering for ``address``: the most specific network holding it."""
    ip = ipaddress.ip_address(address)
    best: tuple[int, str] | None = None
    for entries, urls in services:
        for entry in entries:
            try:
                network = ipaddress.ip_network(entry, strict=False)
            except ValueError:
                continue
            more_specific = best is None or network.prefixlen > best[0]
            if network.version == ip.version and ip in network and urls and more_specific:
                best = (network.prefixlen, _https_first(urls))
    return best[1] if best else None


def _vcard_emails(entity: dict[str, Any]) -> list[str]:
    card = entity.get("vcardArray")
    if not (isinstance(card, list) and len(card) == 2 and isinstance(card[1], list)):
        return []
    return [
        prop[3].strip()
        for prop in card[1]
        if isinstance(prop, list) and len(prop) >= 4 and prop[0] == "email"
        and isinstance(prop[3], str) and "@" in prop[3]
    ]  # fmt: skip


def abuse_emails(doc: dict[str, Any]) -> list[str]:
    """The e-mail addresses of the entities with the ``abuse`` role, at any depth (a
    registrar's abuse contact sits inside the registrar's entity)."""
    found: list[str] = []
    stack = list(doc.get("entities") or [])
    while stack:
        entity = stack.pop(0)
        if not isinstance(entity, dict):
            continue
        if "abuse" in (entity.get("roles") or []):
            found += _vcard_emails(entity)
        stack += entity.get("entities") or []
    return list(dict.fromkeys(e.lower() for e in found))


def _base(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def lookup_domain(ctx: Context, host: str) -> RdapAnswer:
    """The registrar's answer for the domain of ``host`` (errors in ``error``, never raised)."""
    at = utc_now()
    try:
        services = _services(ctx, "dns")
        labels = host.lower().rstrip(".").split(".")
        for n in range(min(DOMAIN_TRIES, max(len(labels) - 1, 1))):
            name = ".".join(labels[n:])
            registry = registry_for_domain(services, name)
            if registry is None:
                return RdapAnswer("domain", host, "", error="no RDAP registry for it", at=at)
            url = _base(registry) + "domain/" + urllib.parse.quote(name)
            doc = _cached(ctx, f"domain:{name}", url, ANSWER_TTL)
            if doc is not None:
                return RdapAnswer("domain", name, url, str(doc.get("ldhName") or name),
                                  abuse_emails(doc), at=at)  # fmt: skip
        return RdapAnswer("domain", host, "", error="not registered at its registry", at=at)
    except RdapError as err:
        return RdapAnswer("domain", host, "", error=str(err), at=at)


def lookup_ip(ctx: Context, address: str) -> RdapAnswer:
    """The hosting network's answer for ``address`` (errors in ``error``, never raised)."""
    at = utc_now()
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return RdapAnswer("ip", address, "", error="no IP address", at=at)
    try:
        registry = registry_for_ip(_services(ctx, f"ipv{ip.version}"), str(ip))
        if registry is None:
            return RdapAnswer("ip", str(ip), "", error="no RDAP registry for it", at=at)
        url = _base(registry) + "ip/" + str(ip)
        doc = _cached(ctx, f"ip:{ip}", url, ANSWER_TTL)
        if doc is None:
            return RdapAnswer("ip", str(ip), url, error="not registered at its registry", at=at)
        return RdapAnswer("ip", str(ip), url, str(doc.get("name") or doc.get("handle") or ""),
                          abuse_emails(doc), at=at)  # fmt: skip
    except RdapError as err:
        return RdapAnswer("ip", str(ip), "", error=str(err), at=at)
