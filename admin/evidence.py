"""The captured page with the copied passages marked, for the evidence frame.

The capture itself is never changed (its bytes are the evidence, with their SHA-256): this
is a marked-up copy, made on request. The page's article text (what was matched) and its
HTML differ in whitespace and in where elements break, so each passage is looked for in
the HTML's text by its sentences: a sentence found inside one text node is wrapped in
``<mark>``, the first one with the id the frame's address points at. Scripts stay
inert: the copy is served under the same sandbox policy as the capture.
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


def mark_passages(html: str, passages: Iterable[str]) -> tuple[str, int]:
    """``html`` with the passages' sentences wrapped in ``<mark>``; and how many were marked."""
    wanted = sentences(passages)
    if not wanted or not html.strip():
        return html, 0
    pattern = re.compile("|".join(re.escape(s) for s in wanted))
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return html, 0
    marks = 0
    for element in list(root.iter()):
        if not isinstance(element.tag, str) or element.tag in _SKIP:
            continue
        if element.text and pattern.search(element.text):
            marks += _mark_text(element, pattern, marks)
        for child in list(element):
            if child.tail and pattern.search(child.tail):
                marks += _mark_tail(child, pattern, marks)
    return lxml.html.tostring(root, encoding="unicode", doctype="<!DOCTYPE html>"), marks


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


def _mark_text(element: etree._Element, pattern: re.Pattern[str], first: int) -> int:
    element.text, marks = _marked(element.text, pattern, first)
    for n, mark in enumerate(marks):
        element.insert(n, mark)
    return len(marks)


def _mark_tail(child: etree._Element, pattern: re.Pattern[str], first: int) -> int:
    child.tail, marks = _marked(child.tail, pattern, first)
    parent = child.getparent()
    at = parent.index(child)
    for n, mark in enumerate(marks, start=1):
        parent.insert(at + n, mark)
    return len(marks)
