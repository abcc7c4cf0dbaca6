"""Submits per second per API key (INGEST_KEY_SUBMITS_PER_SECOND): a token bucket per key.

A key's bucket fills at the rate, up to the burst, and a submit takes one token per job it
asks for. A submit passes while the bucket holds a whole token, even one that asks for more
(a batch of 1,000 at 10 per second): the bucket goes into debt, and the key's next submits
wait until it is paid back. So a batch is never refused for its size alone, and over any
window a key submits no more than the rate allows plus one burst and one batch.

Buckets live in the API process, as a gateway's local limiter does: with N `ingest serve`
processes behind a balancer, a key may submit N times the rate. Without API keys (an open
service) all callers share one bucket. There is one bucket per configured key, so the
buckets are bounded by the settings, not by callers.
"""

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from app.settings import Settings

Seconds = Callable[[], float]
"""A monotonic clock in seconds (time.monotonic; tests pass their own)."""


class SubmitRateExceeded(Exception):
    """A key submits faster than INGEST_KEY_SUBMITS_PER_SECOND; nothing was stored."""

    def __init__(self, per_second: float, wait: float) -> None:
        super().__init__(
            f"this API key is over its rate of submits (INGEST_KEY_SUBMITS_PER_SECOND: "
            f"{per_second:g} per second); try again in {math.ceil(wait)} s"
        )
        self.wait = wait

    @property
    def retry_after(self) -> int:
        """Whole seconds for Retry-After: at least 1, never less than the wait."""
        return max(1, math.ceil(self.wait))


@dataclass(frozen=True)
class Bucket:
    tokens: float
    """Jobs the key may submit now; negative while it pays back a batch."""
    at: float
    """When `tokens` was counted (the monotonic clock)."""


def take(
    bucket: Bucket, jobs: int, now: float, per_second: float, burst: float
) -> tuple[Bucket, float]:
    """The bucket after a submit of `jobs` at `now`, and 0.0 if it passes, else the seconds
    until it would (the bucket then only refilled: a refused submit costs nothing)."""
    tokens = min(burst, bucket.tokens + max(0.0, now - bucket.at) * per_second)
    if tokens >= 1:
        return Bucket(tokens - jobs, now), 0.0
    return Bucket(tokens, now), (1 - tokens) / per_second


class SubmitRate:
    """The buckets of every key, in this API process."""

    def __init__(self, per_second: float, burst: int, clock: Seconds = time.monotonic) -> None:
        self.per_second = per_second
        self.burst = float(burst or max(1.0, per_second))
        self._clock = clock
        self._buckets: dict[str | None, Bucket] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> "SubmitRate":
        return cls(settings.key_submits_per_second, settings.key_submit_burst)

    def admit(self, key: str | None, jobs: int) -> None:
        """Count a submit of `jobs` by `key` (a key's digest; None on an open service), or
        raise SubmitRateExceeded. No limit set: nothing to count."""
        if not self.per_second:
            return
        now = self._clock()
        bucket = self._buckets.get(key) or Bucket(self.burst, now)
        self._buckets[key], wait = take(bucket, jobs, now, self.per_second, self.burst)
        if wait:
            raise SubmitRateExceeded(self.per_second, wait)
