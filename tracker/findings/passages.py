"""The evidence of a finding: its matched passages, the work's text beside the page's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Passage:
    """One matched passage: where it is in the work and on the page, and both texts."""

    index: int
    master_start: int
    master_end: int
    page_start: int
    page_end: int
    master_text: str
    page_text: str


def _clip(text: str, width: int | None) -> str:
    text = text.strip()
    if width is None or len(text) <= width:
        return text
    return text[: width - 1] + "…"


def passages(
    finding: Mapping[str, Any],
    master_text: str,
    page_text: str,
    width: int | None = None,
) -> list[Passage]:
    """The finding's matched passages in page order, texts clipped to ``width`` characters."""
    spans = sorted(finding.get("spans") or [], key=lambda s: (s[2], s[0]))
    return [
        Passage(
            i,
            ms,
            me,
            ss,
            se,
            _clip(master_text[ms:me], width),
            _clip(page_text[ss:se], width),
        )
        for i, (ms, me, ss, se) in enumerate(spans)
    ]
