"""The vocabulary of a job's life: its states, why it died, how an attempt ended.

Stored as plain strings in both databases, so these are `StrEnum`s.
"""

from enum import StrEnum


class JobStatus(StrEnum):
    """Where a job is. Each member says who moves a job into and out of it."""

    PENDING = "pending"
    """In: submit, a retryable failure, a lease taken back, graceful shutdown, an operator's
    retry. Out: the worker's claim (once `retry_after` has passed) or an operator's cancel."""

    RUNNING = "running"
    """In: the claim. Out: the worker records the attempt's outcome, hands the job back on
    shutdown, or another worker takes back the expired lease."""

    SUCCEEDED = "succeeded"
    """In: the worker, after a 2xx answer. Terminal."""

    DEAD = "dead"
    """In: the worker (fatal error or budget spent) or the lease reaper (budget spent).
    Out: an operator's retry, which gives a fresh budget."""

    CANCELLED = "cancelled"
    """In: an operator cancels a pending job. Out: an operator's retry."""


TERMINAL = frozenset({JobStatus.SUCCEEDED, JobStatus.DEAD, JobStatus.CANCELLED})


class ErrorKind(StrEnum):
    """How a failed attempt is treated; see `app.policy.classify_exception`."""

    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    FATAL = "fatal"


class DeadReason(StrEnum):
    FATAL = "fatal"
    RETRIES_EXHAUSTED = "retries_exhausted"
    LEASE_EXPIRED = "lease_expired"
    RATE_LIMITED = "rate_limited"


class AttemptOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    TRANSIENT = "transient"
    RATE_LIMITED = "rate_limited"
    FATAL = "fatal"
    INTERRUPTED = "interrupted"
