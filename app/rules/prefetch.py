"""How far ahead a worker claims: its local queue, bounded by the work it holds.

A queued job is leased to this worker but waits for one of its slots; meanwhile a
higher-priority job submitted later, or one that has just come due, waits behind it (it is
not claimable by anyone until a slot here frees). So the queue holds at most
INGEST_WORKER_PREFETCH_SECONDS of expected work, never more than INGEST_WORKER_PREFETCH
jobs (`prefetch_limit`): fast fetches fill it (a batch per claim, what made the drain
fast); slow ones empty it (each job is claimed when a slot frees, in priority order). How
much a pass claims, and when a finishing job wakes the loop: `claim_size`,
`room_for_a_batch`.

Pure: the worker feeds `FetchTimes` each fetch's duration and asks `prefetch_limit`, then
`claim_size` with its `capacity` (slots plus that limit).
"""

from dataclasses import dataclass

RECENT_WEIGHT = 0.1
"""Each fetch's weight in the running mean: about the last 20 fetches count."""


@dataclass
class FetchTimes:
    """The running mean of how long a fetch holds a slot (exponentially weighted), in
    seconds; None before the first fetch."""

    mean: float | None = None

    def add(self, seconds: float) -> None:
        if self.mean is None:
            self.mean = seconds
        else:
            self.mean += RECENT_WEIGHT * (seconds - self.mean)


def prefetch_limit(
    slots: int, mean_fetch_seconds: float | None, budget_seconds: float, most: int
) -> int:
    """How many jobs the local queue may hold beside `slots` running ones: as many as the
    slots finish in `budget_seconds` at `mean_fetch_seconds` a fetch (queued jobs × the
    mean ÷ slots), at most `most`. A worker that has not finished a fetch yet does not know
    how long one takes: it queues `most`, as a batch is what drains a backlog fast (a
    priority submitted meanwhile is not held behind them: `app.worker.job_worker` hands
    queued jobs back for it)."""
    if budget_seconds <= 0 or most <= 0:
        return 0
    if mean_fetch_seconds is None or mean_fetch_seconds <= 0:
        return most
    return min(most, int(budget_seconds * slots / mean_fetch_seconds))


def refill_at(slots: int, capacity: int) -> int:
    """The room worth a claim, for `slots` and a `capacity` of slots and local queue: a
    third of the capacity, at most a slot's worth, at least 1: a batch worth a transaction,
    while the queue still holds work for every slot."""
    return max(1, min(slots, capacity // 3))


def claim_size(slots: int, capacity: int, running: int, queued: int) -> int:
    """How many jobs a pass claims with `running` fetches and `queued` jobs in hand: all the
    room left in the `capacity` (slots and local queue), once there is room for a batch
    (`refill_at`) or a slot would idle (nothing queued, a slot free); else 0, and the pass
    waits for room."""
    room = capacity - running - queued
    idle_slot = not queued and running < slots
    return room if idle_slot or room >= refill_at(slots, capacity) else 0


def room_for_a_batch(slots: int, capacity: int, running: int, queued: int) -> bool:
    """Whether a finishing job leaves room for a batch (`refill_at`): only then does it wake
    a pass that stopped for room."""
    return capacity - running - queued >= refill_at(slots, capacity)
