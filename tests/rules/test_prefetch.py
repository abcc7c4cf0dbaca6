"""The local queue's work bound and the claim's size (`app.rules.prefetch`), and the wake-up's
priority (`app.model.wake_payload`): pure functions. Fetch times are given, never measured:
the clock of these tests stands still."""

import itertools

import pytest

from app.model import wake_payload, woken_for
from app.rules.prefetch import FetchTimes, claim_size, prefetch_limit, refill_at, room_for_a_batch


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


@pytest.mark.parametrize(
    ("slots", "capacity", "expected"),
    [
        (8, 8, 2),  # no local queue: a third of the slots
        (8, 24, 8),  # a queue of 16: a slot's worth
        (32, 96, 32),  # 32 slots and INGEST_WORKER_PREFETCH=64 (the default)
        (32, 36, 12),  # slow fetches: a queue of 4
        (1, 1, 1),  # never less than one job
        (4, 5, 1),
    ],
)
def test_a_claim_waits_for_room_for_a_third_of_the_capacity_at_most_a_slots_worth(
    slots, capacity, expected
):
    assert expected == refill_at(slots, capacity)


CLAIMS = {
    "an idle worker fills its slots and its queue": (8, 24, 0, 0, 24),
    "a slot would idle: claim even one job": (8, 8, 7, 0, 1),
    "a slot would idle though the room is no batch": (32, 36, 31, 0, 5),
    "every slot busy, no queue: nothing": (8, 8, 8, 0, 0),
    "queued jobs wait for every free slot: no claim below a batch": (8, 24, 4, 13, 0),
    "room for a slot's worth exactly: claimed": (8, 24, 8, 8, 8),
    "one short of a slot's worth: waits": (8, 24, 8, 9, 0),
    "a full queue: nothing": (32, 96, 32, 64, 0),
    "slow fetches, every slot busy: each job claimed as a slot frees": (32, 36, 32, 0, 0),
    "one slot, a queue of two, one queued": (1, 3, 1, 1, 1),
}


@pytest.mark.parametrize(
    ("slots", "capacity", "running", "queued", "expected"), CLAIMS.values(), ids=list(CLAIMS)
)
def test_a_pass_claims_the_room_once_it_is_worth_a_claim(
    slots, capacity, running, queued, expected
):
    assert expected == claim_size(slots, capacity, running, queued)


def grid():
    """Every worker state up to 6 slots and a queue of 12: slots, capacity, running, queued."""
    for slots in range(1, 7):
        for capacity in range(slots, slots + 13):
            for running, queued in itertools.product(range(slots + 1), range(capacity - slots + 1)):
                yield slots, capacity, running, queued


def test_a_claim_is_all_the_room_or_none_and_never_past_the_capacity():
    """Exhaustive: what a pass claims is 0 or the whole room left; what is in hand after
    it never passes the capacity; when something is claimed, it is at least a batch or it
    keeps a slot from idling."""
    for slots, capacity, running, queued in grid():
        room = capacity - running - queued
        claimed = claim_size(slots, capacity, running, queued)
        assert claimed in (0, room), (slots, capacity, running, queued)
        assert running + queued + claimed <= capacity
        if claimed:
            assert claimed >= refill_at(slots, capacity) or (queued == 0 and running < slots)


def test_no_slot_idles_while_a_pass_may_claim():
    """Exhaustive: with nothing queued and a slot free, a pass claims at least enough for
    every free slot."""
    for slots, capacity, running, queued in grid():
        if queued == 0 and running < slots:
            assert claim_size(slots, capacity, running, queued) >= slots - running


def test_more_in_hand_never_claims_more():
    """Exhaustive: one more job running or queued never makes a pass claim more."""
    for slots, capacity, running, queued in grid():
        claimed = claim_size(slots, capacity, running, queued)
        if running < slots:
            assert claim_size(slots, capacity, running + 1, queued) <= claimed
        if running + queued < capacity:
            assert claim_size(slots, capacity, running, queued + 1) <= claimed


def test_a_finishing_job_wakes_a_pass_when_that_pass_claims_a_batch():
    """Exhaustive: a finishing job wakes the pass exactly when it would claim a batch or
    more, not the one job of a slot that idles (the poll takes that); a full capacity never
    wakes one."""
    for slots, capacity, running, queued in grid():
        woken = room_for_a_batch(slots, capacity, running, queued)
        claimed = claim_size(slots, capacity, running, queued)
        assert woken == (claimed >= refill_at(slots, capacity)), (slots, capacity, running, queued)
        if running + queued == capacity:
            assert not woken


WAKES = {
    "room for a slot's worth exactly": (8, 24, 8, 8, True),
    "one short of it": (8, 24, 8, 9, False),
    "a slot idles, but one job is no batch": (8, 8, 7, 0, False),
    "no local queue, a third of the slots free": (9, 9, 6, 0, True),
}


@pytest.mark.parametrize(
    ("slots", "capacity", "running", "queued", "expected"), WAKES.values(), ids=list(WAKES)
)
def test_a_finishing_job_wakes_the_pass_on_room_for_a_batch(
    slots, capacity, running, queued, expected
):
    assert expected == room_for_a_batch(slots, capacity, running, queued)


DRAIN = {
    # fetch durations, running, queued -> claimed; 32 slots, 0.25 s of work, 64 at most
    "no fetch finished yet: the most": ((), 0, 0, 96),
    "fast fetches: the queue fills to the most": ((0.01,) * 5, 32, 0, 64),
    "fast fetches, a slot's worth of the queue taken: refilled": ((0.01,) * 5, 32, 32, 32),
    "fast fetches, less taken: no claim yet": ((0.01,) * 5, 32, 33, 0),
    "half-second fetches: a queue of 16, claimed whole": ((0.5,) * 3, 32, 0, 16),
    "slow fetches: a queue of 4, no claim while every slot runs": ((2.0,) * 5, 32, 0, 0),
    "slow fetches, a slot frees: it and the queue's 4": ((2.0,) * 5, 31, 0, 5),
}


@pytest.mark.parametrize(
    ("durations", "running", "queued", "expected"), DRAIN.values(), ids=list(DRAIN)
)
def test_the_claim_follows_the_fetch_times(durations, running, queued, expected):
    """From the fetch times to the claim, as the worker asks: `FetchTimes`, then
    `prefetch_limit` for the capacity, then `claim_size`."""
    times = FetchTimes()
    for seconds in durations:
        times.add(seconds)
    capacity = 32 + prefetch_limit(32, times.mean, 0.25, 64)
    assert expected == claim_size(32, capacity, running, queued)


@pytest.mark.parametrize("priority", [None, 0, 10, -5])
def test_a_wake_up_carries_its_priority(priority):
    assert priority == woken_for(wake_payload(priority))


def test_wake_ups_read_together_carry_the_highest_priority():
    assert 7 == woken_for("0", "", "7", "3", "")
    assert None is woken_for("", "", "garbage")
    assert -1 == woken_for("-1", "")
