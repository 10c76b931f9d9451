"""The captured page made inert, with the copied passages marked, for the evidence frame.

The capture itself is never changed (its bytes are the evidence, with their SHA-256): this
is a copy, made on request. The page's article text (what was matched) and its HTML differ
in whitespace and in where elements break, so each passage is looked for in the HTML's
text by its sentences: a sentence found inside one text node is wrapped in ``<mark>``, the
first one with the id the frame's address points at.

The copy fetches nothing, so the pirate never learns that (or when) its page is looked
at: frames, objects, ``<base>``, ``<link>`` (preconnect, prefetch, stylesheets) and
``<meta http-equiv>`` (refresh) go; so does every attribute that loads or sends something
(``src``, ``srcset``, ``poster``, ``background``, ``action``, ``ping``, SVG's ``href``…),
unless it is an image's ``data:`` URL, and styles that could (``url()``, ``@import``, escapes).
Links keep their address as a tooltip only. The served policy (``EVIDENCE_CSP``) blocks
the same a second time, but Chromium opens a connection for a frame the policy forbids.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import lxml.html
from lxml import etree

#: Sentences shorter than this are not looked for: "他说：" would be marked everywhere.
MIN_SENTENCE_CHARS = 8
#: Sentences looked for at most (a whole book copying hundreds of works).
MAX_SENTENCES = 3000
FIRST_MARK_ID = "copytrack-first-mark"
MARK_STYLE = "background:#fde68a;outline:2px solid #f59e0b;color:inherit"
#: A capture larger than this (a whole book) is shown in parts of about PART_BYTES: 20 MB
#: marked in one piece kept the finding's page loading for 43 s.
INLINE_CAPTURE_BYTES = 1024 * 1024
PART_BYTES = 512 * 1024
_SENTENCE_END = re.compile(r"(?<=[。！？；!?;])|\n|(?<=[.]) ")
_SKIP = {"script", "style", "template", "noscript", "textarea", "title"}


def sentences(passages: Iterable[str]) -> list[str]:
    """The distinct sentences of the passages worth looking for, longest first."""
    found = {
        piece.strip()
        for passage in passages
        for piece in _SENTENCE_END.split(passage)
        if len(piece.strip()) >= MIN_SENTENCE_CHARS
    }
    return sorted(found, key=lambda s: (-len(s), s))[:MAX_SENTENCES]


#: Elements that fetch (or open a browsing context) whatever their attributes, besides
#: <iframe>.
_FETCHING_ELEMENTS = {
    "frame", "frameset", "object", "embed", "applet", "portal", "base", "link",
}  # fmt: skip
#: Attributes whose value is fetched, or sent to, by a browser (``href`` outside links).
_FETCHING_ATTRIBUTES = {
    "src", "srcset", "imagesrcset", "poster", "background", "data", "action", "formaction",
    "ping", "manifest", "lowsrc", "dynsrc", "longdesc", "codebase", "archive", "classid",
    "icon", "href", "xlink:href", "{http://www.w3.org/1999/xlink}href",
}  # fmt: skip
#: Attributes kept when they hold a ``data:`` URL (one URL, nothing fetched).
_DATA_URL_KEPT = {"src", "poster"}
_LINKS = {"a", "area"}
#: CSS that may fetch: a url() or image-set(), an @import, or an escape that could spell them.
_FETCHING_CSS = re.compile(r"url\s*\(|image-set\s*\(|image\s*\(|@import|\\", re.IGNORECASE)


def marked_copy(html: str, passages: Iterable[str]) -> tuple[str, int]:
    """``html`` made inert (see the module docstring) with the passages' sentences wrapped
    in ``<mark>``; and how many were marked."""
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):  # nothing to parse: nothing to show
        return "<!DOCTYPE html>", 0
    _make_inert(root)
    wanted = sentences(passages)
    marks = _mark(root, re.compile("|".join(re.escape(s) for s in wanted))) if wanted else 0
    return lxml.html.tostring(root, encoding="unicode", doctype="<!DOCTYPE html>"), marks


def _make_inert(root: lxml.html.HtmlElement) -> None:
    for element in list(root.iter()):
        if not isinstance(element.tag, str):
            continue
        tag = element.tag.lower()
        if tag == "iframe" or (tag == "meta" and element.get("http-equiv")):
            element.drop_tree()  # a frame's content is never shown
            continue
        if tag in _FETCHING_ELEMENTS:
            # Its content stays: the parser puts what follows a void <embed> inside it.
            element.drop_tag()
            continue
        if tag == "style" and _FETCHING_CSS.search(element.text or ""):
            element.text = ""
        if tag in _LINKS and (href := element.get("href")):
            element.set("title", element.get("title") or href)
        for name, value in list(element.attrib.items()):
            if _fetches(name.lower(), value):
                del element.attrib[name]


def _fetches(name: str, value: str) -> bool:
    """Whether an attribute makes the browser fetch or send something (an image's
    ``data:`` URL does not)."""
    if name == "style":
        return bool(_FETCHING_CSS.search(value))
    if name in _DATA_URL_KEPT and value.strip().lower().startswith("data:"):
        return False
    return name in _FETCHING_ATTRIBUTES


def _mark(root: etree._Element, pattern: re.Pattern[str]) -> int:
    marks = 0
    for element in list(root.iter()):
        if not isinstance(element.tag, str) or element.tag in _SKIP:
            continue
        if element.text and pattern.search(element.text):
            marks += _mark_text(element, element.text, pattern, marks)
        for child in list(element):
            if child.tail and pattern.search(child.tail):
                marks += _mark_tail(element, child, child.tail, pattern, marks)
    return marks


def _marked(text: str, pattern: re.Pattern[str], first: int) -> tuple[str, list[etree._Element]]:
    """The text before the first match, and the marks (each with its tail) for the rest."""
    pieces: list[etree._Element] = []
    head, last = "", 0
    for n, match in enumerate(pattern.finditer(text)):
        before = text[last : match.start()]
        if pieces:
            pieces[-1].tail = before
        else:
            head = before
        mark = etree.Element("mark", style=MARK_STYLE)
        if first + n == 0:
            mark.set("id", FIRST_MARK_ID)
        mark.text = match.group()
        pieces.append(mark)
        last = match.end()
    pieces[-1].tail = text[last:]
    return head, pieces


def _mark_text(element: etree._Element, text: str, pattern: re.Pattern[str], first: int) -> int:
    element.text, marks = _marked(text, pattern, first)
    for n, mark in enumerate(marks):
        element.insert(n, mark)
    return len(marks)


def _mark_tail(
    parent: etree._Element, child: etree._Element, tail: str, pattern: re.Pattern[str], first: int
) -> int:
    child.tail, marks = _marked(tail, pattern, first)
    at = parent.index(child)
    for n, mark in enumerate(marks, start=1):
        parent.insert(at + n, mark)
    return len(marks)


def part_count(size: int) -> int:
    """How many parts a capture of ``size`` bytes is shown in (1: whole)."""
    return 1 if size <= INLINE_CAPTURE_BYTES else -(-size // PART_BYTES)


def capture_part(raw: bytes, part: int) -> bytes:
    """Part ``part`` (from 1) of a large capture: about PART_BYTES, cut before a tag or a
    line, which is never inside a character (UTF-8, GBK, GB18030, Big5, Shift JIS)."""
    return raw[_cut(raw, (part - 1) * PART_BYTES) : _cut(raw, part * PART_BYTES)]


def part_holding(raw: bytes, passages: Iterable[str], encoding: str) -> int:
    """The part of a large capture in which the first passage's longest sentence is (1
    when it is not found as such)."""
    wanted = sentences(list(passages)[:1])
    if not wanted:
        return 1
    try:
        at = raw.find(wanted[0].encode(encoding))
    except (LookupError, UnicodeError):
        at = -1
    part = 1
    while part < part_count(len(raw)) and at >= _cut(raw, part * PART_BYTES):
        part += 1
    return part


def _cut(raw: bytes, at: int) -> int:
    if at >= len(raw):
        return len(raw)
    found = [i for i in (raw.find(b"<", at), raw.find(b"\n", at)) if i != -1]
    return min(found, default=len(raw))
