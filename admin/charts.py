"""The dashboard's bar chart, laid out by the server and drawn as inline SVG.

One chart did not justify a chart library: plotly.js was 1.5 MB to download before the
dashboard drew (2–3 s on a first visit). The template draws what `bar_chart` computes —
bars, grid lines with whole-number ticks, day labels — with no script at all, so it also
shows in a PDF, with scripts off and under the strictest style policy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: Drawing size in SVG units (the image scales to its box, keeping its proportions).
WIDTH, HEIGHT = 720, 240
LEFT, RIGHT, TOP, BOTTOM = 40, 8, 10, 28  # margins: ticks on the left, days below
MAX_DAY_LABELS = 8


@dataclass(frozen=True)
class Bar:
    day: str  # YYYY-MM-DD
    value: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Tick:
    value: int
    y: float


@dataclass(frozen=True)
class DayLabel:
    text: str  # MM-DD
    x: float


@dataclass(frozen=True)
class BarChart:
    bars: list[Bar]
    ticks: list[Tick]
    labels: list[DayLabel]
    width: int = WIDTH
    height: int = HEIGHT
    left: float = LEFT
    right: float = WIDTH - RIGHT
    baseline: float = HEIGHT - BOTTOM


def _step(highest: int, ticks: int = 5) -> int:
    """A whole tick step of 1, 2 or 5 × 10^k showing ``highest`` in about ``ticks`` steps."""
    rough = max(1.0, highest / ticks)
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= rough)


def bar_chart(points: Sequence[tuple[str, int]]) -> BarChart:
    """Bars for (day, count) points, oldest first, on a scale from zero."""
    step = _step(max((value for _, value in points), default=0))
    top = step * max(1, math.ceil(max((v for _, v in points), default=0) / step))
    plot_height = HEIGHT - TOP - BOTTOM
    slot = (WIDTH - LEFT - RIGHT) / max(1, len(points))
    gap = slot * 0.25

    def y_of(value: float) -> float:
        return round(HEIGHT - BOTTOM - plot_height * value / top, 1)

    bars = [
        Bar(day, value, round(LEFT + i * slot + gap / 2, 1), y_of(value), round(slot - gap, 1),
            round(HEIGHT - BOTTOM - y_of(value), 1))
        for i, (day, value) in enumerate(points)
    ]  # fmt: skip
    every = max(1, math.ceil(len(points) / MAX_DAY_LABELS))
    labels = [
        DayLabel(day[5:], round(LEFT + (i + 0.5) * slot, 1))
        for i, (day, _) in enumerate(points)
        if (len(points) - 1 - i) % every == 0  # the latest day always has its label
    ]
    ticks = [Tick(value, y_of(value)) for value in range(0, top + 1, step)]
    return BarChart(bars, ticks, labels)
