"""The dashboard's chart, laid out: attempts finished per minute (stacked bars by how they
ended) and the queue lag (the longest per minute), over the last hour. Pure: it turns
`app.store.activity.Minute`s into shapes with coordinates, and the template
(`app/templates/chart.html`) draws them as inline SVG; no script, nothing loaded.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from app.store.activity import Ended, Minute
from app.text.wording import seconds

WIDTH = 760
LEFT, RIGHT = 52, 8
BARS_TOP, BARS_HEIGHT = 12, 150
LAG_TOP, LAG_HEIGHT = BARS_TOP + BARS_HEIGHT + 40, 70
HEIGHT = LAG_TOP + LAG_HEIGHT + 22
PLOT = WIDTH - LEFT - RIGHT
TICK_EVERY = 10
"""Minutes between two labels of the time axis."""


@dataclass(frozen=True)
class Rect:
    x: float
    y: float
    width: float
    height: float
    ended: Ended


@dataclass(frozen=True)
class Column:
    """One minute: its stacked bars, and what a pointer over it says."""

    x: float
    width: float
    bars: list[Rect]
    title: str


@dataclass(frozen=True)
class Tick:
    at: float
    label: str


@dataclass(frozen=True)
class Chart:
    columns: list[Column]
    totals: dict[Ended, int]
    count_ticks: list[Tick]
    """Heights of the bars' axis, with their counts."""
    lag_ticks: list[Tick]
    time_ticks: list[Tick]
    lag_lines: list[str]
    """SVG polyline points, one line of steps per run of minutes that have a lag."""
    lag_latest: str
    """The longest lag of the latest minute that has one, and that minute; or "none"."""
    first: str
    last: str

    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right_edge: int = WIDTH - RIGHT
    bars_top: int = BARS_TOP
    bars_bottom: int = BARS_TOP + BARS_HEIGHT
    lag_top: int = LAG_TOP
    lag_bottom: int = LAG_TOP + LAG_HEIGHT


def nice_ceiling(value: float) -> float:
    """The least of 1, 2, 3 or 5 times a power of ten that is at least `value` (1 for 0)."""
    if value <= 0:
        return 1
    power = 10.0 ** math.floor(math.log10(value))
    return next(step * power for step in (1, 2, 3, 5, 10) if step * power >= value)


def layout(minutes: Sequence[Minute]) -> Chart:
    """The chart of `minutes`, oldest first."""
    slot = PLOT / max(len(minutes), 1)
    most = nice_ceiling(max((sum(m.finished.values()) for m in minutes), default=0))
    longest = nice_ceiling(max((m.lag_max_ms or 0 for m in minutes), default=0) / 1000)
    columns = []
    lines: list[list[str]] = []
    previous_had_lag = False
    for i, minute in enumerate(minutes):
        x = LEFT + i * slot
        base = float(BARS_TOP + BARS_HEIGHT)
        bars = []
        for ended in Ended:
            count = minute.finished[ended]
            if count:
                height = count / most * BARS_HEIGHT
                base -= height
                bars.append(Rect(x + 0.5, base, max(slot - 1, 1), height, ended))
        columns.append(Column(x, slot, bars, _title(minute)))
        if minute.lag_max_ms is None:
            previous_had_lag = False
            continue
        if not previous_had_lag:
            lines.append([])
        y = LAG_TOP + LAG_HEIGHT - minute.lag_max_ms / 1000 / longest * LAG_HEIGHT
        # A step across the minute: the value holds for the minute, and a lone minute shows.
        lines[-1] += [f"{x:.1f},{y:.1f}", f"{x + slot:.1f},{y:.1f}"]
        previous_had_lag = True
    latest = next((m for m in reversed(minutes) if m.lag_max_ms is not None), None)
    return Chart(
        columns=columns,
        totals={ended: sum(m.finished[ended] for m in minutes) for ended in Ended},
        count_ticks=[
            Tick(BARS_TOP + BARS_HEIGHT * (1 - share), _count(most * share))
            for share in (0, 0.5, 1)
        ],
        lag_ticks=[
            Tick(LAG_TOP + LAG_HEIGHT * (1 - share), _lag(longest * share)) for share in (0, 1)
        ],
        time_ticks=[
            Tick(LEFT + i * slot, minute.start.strftime("%H:%M"))
            for i, minute in enumerate(minutes)
            if minute.start.minute % TICK_EVERY == 0
        ],
        lag_lines=[" ".join(points) for points in lines],
        lag_latest="none"
        if latest is None or latest.lag_max_ms is None
        else f"{_lag(latest.lag_max_ms / 1000)} at {latest.start:%H:%M}",
        first=minutes[0].start.strftime("%H:%M") if minutes else "",
        last=minutes[-1].start.strftime("%H:%M") if minutes else "",
    )


def _lag(value: float) -> str:
    """`350 ms` under a second, else `12.5s`."""
    if value == 0:
        return "0"
    return f"{round(value * 1000)} ms" if value < 1 else seconds(value)


def _count(value: float) -> str:
    return f"{value:g}"


def _title(minute: Minute) -> str:
    counts = ", ".join(f"{minute.finished[ended]} {ended}" for ended in Ended)
    text = f"{minute.start:%H:%M} UTC: {counts}"
    if minute.lag_max_ms is not None and minute.lag_mean_ms is not None:
        text += (
            f"; queue lag longest {_lag(minute.lag_max_ms / 1000)},"
            f" mean {_lag(minute.lag_mean_ms / 1000)}"
        )
    return text
