"""What a capture says about who runs its site: signals that two domains sharing them are
likely one operator's.

- ``analytics``: Google Analytics (``UA-`` accounts, GA4 ``G-`` measurement ids), Google
  Tag Manager (``GTM-``), Google AdSense publishers (``pub-``), Baidu 统计
  (``hm.js?<id>``), CNZZ and 51.la site ids, as they appear in the HTML;
- ``redirect``: the page was reached by a redirect from another domain (both domains get
  the target's name);
- ``ip``: the address the capture was fetched from;
- ``favicon``: the icon's path without its host (``/static/ab12/fav.ico``; one at the root,
  ``/favicon.ico``, is everyone's and says nothing), or the hash of an icon given inline;
- ``template``: a hash of the page's skeleton around the article (tags and classes, a
  few levels deep, repeats folded, no text), when it is distinctive enough.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import lxml.html
from lxml import etree

KINDS = ("analytics", "redirect", "ip", "favicon", "template")
#: Bytes of a capture read for its signals (the head and the page's frame come first).
READ_BYTES = 512 * 1024
_ACCOUNTS = (
    ("ga", re.compile(rb"\b(UA-\d{4,10})-\d{1,4}\b")),
    ("ga4", re.compile(rb"(?:gtag/js\?id=|['\"]config['\"]\s*,\s*['\"])(G-[A-Z0-9]{6,12})\b")),
    ("gtm", re.compile(rb"\b(GTM-[A-Z0-9]{4,9})\b")),
    ("adsense", re.compile(rb"\bca-(pub-\d{10,20})\b|\b(pub-\d{16})\b")),
    ("baidu", re.compile(rb"hm\.baidu\.com/hm\.js\?([0-9a-f]{32})")),
    ("cnzz", re.compile(rb"cnzz\.com/[^\"'\s<>]*?[?&](?:web_)?id=(\d{4,12})|CNZZ_DATA(\d{4,12})")),
    ("51la", re.compile(rb"js\.users\.51\.la/(\d{4,12})\.js"
                        rb"|LA\.init\(\s*\{\s*id\s*:\s*['\"]([A-Za-z0-9]{4,24})['\"]")),
)  # fmt: skip
#: Icon paths every site may have: they tie nobody.
_GENERIC_ICONS = re.compile(r"^/(favicon|apple-touch-icon|icon)[\w-]*\.(ico|png|svg|gif|jpe?g)$")
#: Levels below <body> the template's skeleton reaches, and the elements it must hold
#: (distinct tag.class signatures) to count: a bare <body><p> is every other page's.
TEMPLATE_DEPTH = 5
TEMPLATE_MIN_SHAPES = 8
_SKIPPED = {"script", "style", "noscript", "template", "svg", "iframe", "br", "wbr"}
#: Where an article's own markup starts: its inside varies with the text, not the site.
_ARTICLE = {"article", "main", "p"}


@dataclass(frozen=True)
class Signal:
    kind: str  # one of KINDS
    value: str  # the same value on two domains ties them

    def as_record(self) -> dict[str, str]:
        return {"kind": self.kind, "value": self.value}


def page_signals(page: dict[str, Any], raw: bytes | None) -> list[Signal]:
    """The signals of a stored page (with its ``url``, ``final_url``, ``redirected_from``
    and ``ip``) and its captured bytes."""
    found: set[Signal] = set()
    if redirect_sources(page):
        found.add(Signal("redirect", _host(page.get("final_url") or page["url"])))
    if page.get("ip"):
        found.add(Signal("ip", page["ip"]))
    if raw:
        head = raw[:READ_BYTES]
        found.update(Signal("analytics", account) for account in accounts(head))
        found.update(_markup_signals(head))
    return sorted(found, key=lambda s: (s.kind, s.value))


def redirect_sources(page: dict[str, Any]) -> list[str]:
    """The other domains that redirected to the page (each shares its ``redirect`` signal)."""
    host = _host(page.get("final_url") or page["url"])
    sources = [_host(u) for u in [*(page.get("redirected_from") or []), page["url"]]]
    return sorted({s for s in sources if s and s != host})


def accounts(html: bytes) -> set[str]:
    """The analytics and ad accounts named in ``html``, as ``service:id``."""
    found = set()
    for service, pattern in _ACCOUNTS:
        for match in pattern.finditer(html):
            value = next(group for group in match.groups() if group)
            found.add(f"{service}:{value.decode('ascii')}")
    return found


def _markup_signals(html: bytes) -> Iterator[Signal]:
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return
    icon = _favicon(root)
    if icon:
        yield Signal("favicon", icon)
    skeleton = template_skeleton(root)
    if len(set(skeleton)) >= TEMPLATE_MIN_SHAPES:
        yield Signal("template", hashlib.sha256("\n".join(skeleton).encode()).hexdigest()[:32])


def _favicon(root: etree._Element) -> str | None:
    for link in root.iter("link"):
        rel = (link.get("rel") or "").lower().split()
        href = (link.get("href") or "").strip()
        if "icon" not in rel or not href:
            continue
        if href.startswith("data:"):
            return "sha256:" + hashlib.sha256(href.encode()).hexdigest()[:32]
        path = urlsplit(href).path.lower()
        return None if not path or _GENERIC_ICONS.match(path) else path
    return None


def template_skeleton(root: etree._Element) -> list[str]:
    """The page's frame: each element's depth, tag and sorted classes, down to
    TEMPLATE_DEPTH below <body>, siblings of the same shape folded into one, and nothing of
    an article's inside."""
    body = root.find("body")
    if body is None:
        return []
    shapes: list[str] = []

    def walk(element: etree._Element, depth: int) -> None:
        previous = None
        for child in element:
            if not isinstance(child.tag, str) or child.tag in _SKIPPED:
                continue
            classes = " ".join(sorted((child.get("class") or "").split()))
            shape = f"{depth}:{child.tag}.{classes}"
            if shape == previous:
                continue
            previous = shape
            shapes.append(shape)
            if depth < TEMPLATE_DEPTH and child.tag not in _ARTICLE:
                walk(child, depth + 1)

    walk(body, 1)
    return shapes


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()
