"""The local queue's work bound (`app.prefetch`) and the wake-up's priority
(`app.model.wake_payload`): pure functions."""

import pytest

from app.model import wake_payload, woken_for
from app.prefetch import FetchTimes, prefetch_limit


def test_before_any_fetch_finished_the_queue_holds_the_most():
    assert 64 == prefetch_limit(32, None, 0.25, 64)
    assert 0 == prefetch_limit(32, None, 0.0, 64)


@pytest.mark.parametrize(
    ("slots", "mean", "budget", "most", "expected"),
    [
        (32, 0.1, 0.25, 64, 64),  # 80 jobs of work fit: capped by INGEST_WORKER_PREFETCH
        (32, 0.5, 0.25, 64, 16),  # a quarter second at 16 ms a slot
        (1, 0.3, 0.25, 2, 0),  # one slow slot: claim only when it frees
        (1, 0.1, 0.25, 2, 2),
        (4, 0.2, 0.25, 8, 5),  # floored: never more work than the budget
        (32, 0.0, 0.25, 64, 64),  # instant fetches
        (32, 0.1, 0.0, 64, 0),  # no budget: no queue
        (32, 0.1, 0.25, 0, 0),  # INGEST_WORKER_PREFETCH=0
    ],
)
def test_the_queue_holds_the_work_the_slots_finish_in_the_budget(
    slots, mean, budget, most, expected
):
    assert expected == prefetch_limit(slots, mean, budget, most)


def test_fetch_times_follow_the_recent_fetches():
    times = FetchTimes()
    assert times.mean is None
    times.add(0.01)
    assert 0.01 == times.mean
    for _ in range(50):
        times.add(1.0)
    assert times.mean is not None and 0.99 < times.mean <= 1.0
    times.add(0.0)
    assert times.mean == pytest.approx(0.9, abs=0.01)  # one fast fetch moves it a tenth


@pytest.mark.parametrize("priority", [None, 0, 10, -5])
def test_a_wake_up_carries_its_priority(priority):
    assert priority == woken_for(wake_payload(priority))


def test_wake_ups_read_together_carry_the_highest_priority():
    assert 7 == woken_for("0", "", "7", "3", "")
    assert None is woken_for("", "", "garbage")
    assert -1 == woken_for("-1", "")
