"""How far ahead a worker claims: its local queue, bounded by the work it holds.

A queued job is leased to this worker but waits for one of its slots; meanwhile a
higher-priority job submitted later, or one that has just come due, waits behind it (it is
not claimable by anyone until a slot here frees). So the queue holds at most
INGEST_WORKER_PREFETCH_SECONDS of expected work: queued jobs × the recent mean time a fetch
holds a slot ÷ slots, and never more than INGEST_WORKER_PREFETCH jobs. Fast fetches fill it
(a batch per claim, what made the drain fast); slow ones empty it (each job is claimed when
a slot frees, in priority order). A worker that has not finished a fetch yet does not know
how long one takes: it queues INGEST_WORKER_PREFETCH jobs, as a batch is what drains a
backlog fast (a priority submitted meanwhile is not held behind them: `app.worker` hands
queued jobs back for it).

Pure: the worker feeds `FetchTimes` each fetch's duration and asks `prefetch_limit`.
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
    slots finish in `budget_seconds` at `mean_fetch_seconds` a fetch, at most `most`."""
    if budget_seconds <= 0 or most <= 0:
        return 0
    if mean_fetch_seconds is None or mean_fetch_seconds <= 0:
        return most
    return min(most, int(budget_seconds * slots / mean_fetch_seconds))
