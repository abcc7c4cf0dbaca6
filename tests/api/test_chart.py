"""app.api.dashboard.chart: the last hour laid out for SVG, pure."""

from datetime import UTC, datetime, timedelta

import pytest

from app.api.dashboard.chart import BARS_HEIGHT, BARS_TOP, layout, nice_ceiling
from app.store.activity import Ended, Minute

START = datetime(2026, 11, 30, 3, 9, tzinfo=UTC)


def minute(
    i: int,
    succeeded: int = 0,
    retried: int = 0,
    dead: int = 0,
    lag: int | None = None,
    unchanged: int = 0,
):
    finished = {
        Ended.SUCCEEDED: succeeded,
        Ended.UNCHANGED: unchanged,
        Ended.RETRIED: retried,
        Ended.DEAD: dead,
    }
    return Minute(START + timedelta(minutes=i), finished, lag, lag)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 1), (1, 1), (1.5, 2), (27, 30), (30, 30), (31, 50), (0.05, 0.05), (720, 1000)],
)
def test_nice_ceiling(value, expected):
    """The axis ends at 1, 2, 3 or 5 times a power of ten."""
    assert expected == pytest.approx(nice_ceiling(value))


def test_bars_stack_to_the_count_and_the_totals_add_up():
    """A minute of 20 (15 + 3 + 2) on an axis of 20 fills the bars' height; the legend's
    totals are the hour's; the lag is a step per minute that has one."""
    chart = layout([minute(0, 15, 3, 2, lag=1500), minute(1), minute(2, 5, lag=200)])
    first = chart.columns[0]
    assert [Ended.SUCCEEDED, Ended.RETRIED, Ended.DEAD] == [bar.ended for bar in first.bars]
    assert BARS_HEIGHT == pytest.approx(sum(bar.height for bar in first.bars))
    assert BARS_TOP == pytest.approx(min(bar.y for bar in first.bars))
    assert [] == chart.columns[1].bars
    assert {Ended.SUCCEEDED: 20, Ended.UNCHANGED: 0, Ended.RETRIED: 3, Ended.DEAD: 2} == (
        chart.totals
    )
    assert ["0", "10", "20"] == [tick.label for tick in chart.count_ticks]
    assert 2 == len(chart.lag_lines)  # the empty minute breaks the line
    assert ["0", "2s"] == [tick.label for tick in chart.lag_ticks]
    assert "200 ms at 03:11" == chart.lag_latest
    assert (
        "03:09 UTC: 15 succeeded, 0 unchanged, 3 retried, 2 dead; queue lag longest 1.5s, mean 1.5s"
    ) == first.title


def test_unchanged_refreshes_are_their_own_bars():
    """Refreshes that found the content unchanged stack on the successes, in their own
    series, and count in their own total."""
    chart = layout([minute(0, succeeded=2, unchanged=5, dead=1)])
    (column,) = chart.columns
    assert [(Ended.SUCCEEDED, 2), (Ended.UNCHANGED, 5), (Ended.DEAD, 1)] == [
        (bar.ended, round(bar.height / BARS_HEIGHT * 10)) for bar in column.bars
    ]
    assert (5, "03:09 UTC: 2 succeeded, 5 unchanged, 0 retried, 1 dead") == (
        chart.totals[Ended.UNCHANGED],
        column.title,
    )


def test_the_time_axis_is_labelled_every_ten_minutes():
    """Labels at :10, :20, ... of the hour shown."""
    chart = layout([minute(i) for i in range(60)])
    assert ["03:10", "03:20", "03:30", "03:40", "03:50", "04:00"] == [
        tick.label for tick in chart.time_ticks
    ]
    assert "none" == chart.lag_latest
