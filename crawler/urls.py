"""URL canonicalization and a campaign's URL scope (domains with ports, allow/deny patterns).

Every URL the crawler requests or stores goes through :func:`canonicalize` first, so
``/a?utm_source=rss``, ``/a#comments`` and ``HTTP://Host:80/a`` are one page, within a run
(the dupefilter) and across runs (pages are keyed by canonical URL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

__all__ = ["TRACKING_PARAMS", "UrlScope", "canonicalize", "host_port"]

#: Query parameters that only say where a visitor came from (lowercase names).
TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid",
        "igshid", "mc_cid", "mc_eid", "_hsenc", "_hsmi", "mkt_tok", "ref_src", "spm",
        "scm", "share_token", "_ga", "_gl",
    }
)  # fmt: skip
TRACKING_PREFIXES = ("utm_",)
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEMES = ("http", "https")


def _is_tracking(pair: str) -> bool:
    name = unquote_plus(pair.partition("=")[0]).strip().lower()
    return name in TRACKING_PARAMS or name.startswith(TRACKING_PREFIXES)


def canonicalize(url: str) -> str:
    """The canonical form of an http(s) URL: no fragment, no tracking parameters,
    no default port, lowercase host, sorted query, normalized percent-encoding."""
    parts = urlsplit(url.strip())
    # Filter the raw pairs: decoding and re-encoding would change values that were fine.
    query = "&".join(p for p in parts.query.split("&") if p and not _is_tracking(p))
    netloc = parts.netloc
    scheme = parts.scheme.lower()
    if parts.port is not None and parts.port == _DEFAULT_PORTS.get(scheme):
        netloc = netloc.rpartition(":")[0]
    return canonicalize_url(urlunsplit((scheme, netloc, parts.path, query, "")))


def host_port(url: str) -> tuple[str, int | None]:
    """(lowercase host, explicit port or None) of a URL; ValueError on a bad port."""
    parts = urlsplit(url)
    return (parts.hostname or "").rstrip("."), parts.port


@dataclass(frozen=True)
class UrlScope:
    """Which URLs a campaign may request.

    ``domains`` entries are ``host`` (that host and its subdomains, any port) or
    ``host:port`` (exactly that origin): Scrapy's own ``allowed_domains`` ignores ports,
    and the test web, like many staging hosts, serves one site per port.
    ``allow``/``deny`` are regular expressions searched in the URL; they apply to
    followed links, not to the seeds.
    """

    domains: tuple[str, ...]
    allow: tuple[re.Pattern[str], ...] = ()
    deny: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def build(cls, domains: Iterable[str], allow: Iterable[str], deny: Iterable[str]) -> UrlScope:
        return cls(
            tuple(d.lower() for d in domains),
            tuple(re.compile(p) for p in allow),
            tuple(re.compile(p) for p in deny),
        )

    def in_domains(self, url: str) -> bool:
        """True for an http(s) URL on one of the scope's hosts (and port, where given)."""
        try:
            parts = urlsplit(url)
            host, port = host_port(url)
        except ValueError:
            return False
        if parts.scheme not in _SCHEMES or not host:
            return False
        port = port or _DEFAULT_PORTS[parts.scheme]
        for domain in self.domains:
            name, _, want_port = domain.rpartition(":") if _has_port(domain) else (domain, "", "")
            name = name.strip("[]")  # urlsplit gives IPv6 hosts without brackets
            if want_port:
                if host == name and port == int(want_port):
                    return True
            elif host == name or host.endswith("." + name):
                return True
        return False

    def allows(self, url: str) -> bool:
        """True if a followed link to ``url`` is in scope: domains, allow and deny patterns."""
        if not self.in_domains(url):
            return False
        if self.allow and not any(p.search(url) for p in self.allow):
            return False
        return not any(p.search(url) for p in self.deny)


def _has_port(domain: str) -> bool:
    # "host:port"; a bare IPv6 address has colons too, but then the part after the last
    # colon is not a port unless the host is bracketed.
    head, sep, tail = domain.rpartition(":")
    return bool(sep) and tail.isdigit() and (head.endswith("]") or ":" not in head)
