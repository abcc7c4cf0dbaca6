"""Logging: set-up, and the one line each job transition writes.

The lines read the state they report: "will retry at T" only when the job was rescheduled,
and exactly one "dead (<reason>)" line, carrying the job id, per death.
"""

import logging
from datetime import datetime

from app.fetcher import FetchResult
from app.policy import Decision, Failure, Reschedule

log = logging.getLogger("ingest.worker")


def configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )
    # One line per request would drown the job events.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)


def timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def seconds(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".") + "s"


def _attempt(job_id: str, attempt: int, max_attempts: int) -> str:
    return f"job {job_id} attempt {attempt}/{max_attempts}"


def job_succeeded(job_id: str, attempt: int, max_attempts: int, result: FetchResult) -> None:
    log.info(
        "%s succeeded: HTTP %d, %d bytes",
        _attempt(job_id, attempt, max_attempts),
        result.http_status,
        result.bytes,
    )


def job_failed(
    job_id: str,
    attempt: int,
    max_attempts: int,
    failure: Failure,
    decision: Decision,
    deferral: str = "",
) -> None:
    """`deferral` ("3/20") is set when a rate-limited answer gave the attempt back."""
    if isinstance(decision, Reschedule):
        then = (
            f"will retry at {timestamp(decision.retry_at)} (in {seconds(decision.delay_seconds)})"
        )
        if not failure.spends_attempt:
            then += f", attempt not spent (deferral {deferral})"
    else:
        then = f"dead ({decision.reason})"
    failed = f"failed: {failure.label} ({failure.kind})"
    line = f"{_attempt(job_id, attempt, max_attempts)} {failed}; {then}"
    if failure.unexpected is not None:
        # Not a known case: a bug, or a new failure to classify. The trace says which.
        log.error("%s [unexpected %s]", line, failure.type, exc_info=failure.unexpected)
    else:
        log.info(line)


def job_reclaimed(job_id: str, attempt: int, max_attempts: int, dead: bool) -> None:
    then = "dead (lease_expired)" if dead else "will retry now"
    log.warning("%s interrupted: lease expired; %s", _attempt(job_id, attempt, max_attempts), then)


def job_released(job_id: str, attempt: int, max_attempts: int) -> None:
    log.info(
        "%s interrupted: worker shutting down; handed back, due now, attempt not spent",
        _attempt(job_id, attempt, max_attempts),
    )


def job_lease_lost(job_id: str, attempt: int, max_attempts: int) -> None:
    log.warning(
        "%s finished after its lease was taken back; outcome discarded",
        _attempt(job_id, attempt, max_attempts),
    )
