"""Logs and metrics of the job transitions, webhook deliveries and loops: one function per
event, called once.

Each function writes the event's log line and counts it. The lines read the state
they report: "will retry at T" only when the job was rescheduled, and exactly one
"dead (<reason>)" line, carrying the job id, per death. The two log formats:
`configure_logging`. Counts go to the `Metrics` of the process the code runs in, found
through a context variable (`counting_into`), so no constructor carries a metrics object.

This module never issues SQL and decides nothing.
"""

import contextvars
import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, assert_never

from app.model import (
    AttemptOutcome,
    ClaimedDelivery,
    Confirmed,
    DeadReason,
    Deferred,
    DeliveryStatus,
    Died,
    DomainPause,
    Expired,
    Failure,
    HandedBack,
    JobStatus,
    Lease,
    NotKept,
    Outcome,
    Retried,
    Succeeded,
)
from app.observability.metrics import Metrics
from app.text.wording import counted, seconds

log = logging.getLogger("ingest.worker")

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

JOB_FIELDS = (
    "event",
    "job_id",
    "tenant",
    "domain",
    "attempt",
    "max_attempts",
    "status",
    "outcome",
    "error_kind",
    "error_type",
    "http_status",
    "next_retry_at",
    "dead_reason",
    "deferrals",
    "duration_ms",
)
"""The keys of a job transition's JSON log line, besides time, level, logger and message."""

DELIVERY_FIELDS = (
    "event",
    "job_id",
    "delivery_id",
    "callback_event",
    "attempt",
    "max_attempts",
    "status",
    "outcome",
    "error_kind",
    "error_type",
    "http_status",
    "next_retry_at",
    "duration_ms",
)
"""The keys of a webhook delivery's JSON log line, besides time, level, logger and message.
`callback_event` is what the callback announces (job.succeeded, job.dead)."""

_EVENT = "ingest_event"  # the LogRecord attribute that carries an event's fields
webhooks_log = logging.getLogger("ingest.webhooks")

_metrics: contextvars.ContextVar[Metrics | None] = contextvars.ContextVar(
    "ingest_metrics", default=None
)


def configure_logging(level: str, log_format: str = "text") -> None:
    """Two log formats (INGEST_LOG_FORMAT). `text`: `<time> <LEVEL> <logger>: <message>`.
    `json`: one object per line with the same message and, for an event, its fields: every
    one of `JOB_FIELDS` for a job transition, of `DELIVERY_FIELDS` for a webhook delivery
    (null where it does not apply), so log pipelines never parse sentences."""
    handler = logging.StreamHandler()
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    # One line per request would drown the job events. INGEST_ACCESS_LOG turns on ingest's
    # own access lines instead (`app.api.routes.metrics`): they name the route and the duration,
    # and carry fields in JSON, which uvicorn's do not.
    logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
    logging.getLogger("httpx").setLevel(logging.WARNING)


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the transition's fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": timestamp(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, _EVENT, {}))
        if record.exc_info:
            entry["traceback"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def carrying(fields: dict[str, Any]) -> dict[str, Any]:
    """The `extra` of a log call whose JSON line carries `fields` (an access line's)."""
    return {_EVENT: fields}


def counting_into(metrics: Metrics) -> contextvars.Context:
    """A copy of the current context in which transitions count into `metrics`; start the
    worker in it: `asyncio.create_task(worker.run(), context=counting_into(metrics))`.

    Counts go to the `Metrics` of the app or `ingest worker` process the code runs in: the
    worker's task is started in such a context, and each request runs in one
    (`app.api.routes.metrics`). Code that runs outside any (the CLI, unit tests) counts
    nothing, and two apps in one process never mix their counts."""
    context = contextvars.copy_context()
    context.run(_metrics.set, metrics)
    return context


@contextmanager
def counting(metrics: Metrics) -> Iterator[None]:
    """Transitions within the block count into `metrics`."""
    token = _metrics.set(metrics)
    try:
        yield
    finally:
        _metrics.reset(token)


def timestamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _attempt(job: Lease) -> str:
    return f"job {job.id} attempt {job.attempt}/{job.max_attempts}"


def _fields(event: str, job: Lease, **values: Any) -> dict[str, Any]:
    fields = dict.fromkeys(JOB_FIELDS)
    fields |= {
        "event": event,
        "job_id": job.id,
        "tenant": job.tenant,
        "domain": job.domain,
        "attempt": job.attempt,
        "max_attempts": job.max_attempts,
        "deferrals": job.deferrals,
    }
    fields.update(values)
    return carrying(fields)


def _failure(failure: Failure) -> dict[str, Any]:
    return {
        "outcome": AttemptOutcome(failure.kind),
        "error_kind": failure.kind,
        "error_type": failure.type,
        "http_status": failure.http_status,
    }


def jobs_submitted(count: int) -> None:
    if (metrics := _metrics.get()) is not None:
        metrics.submitted.inc(count)


def job_started(lease: Lease) -> None:
    """The claim made the job running (no log line: the outcome's line follows)."""
    if (metrics := _metrics.get()) is not None and lease.due_at is not None:
        lag = (lease.claimed_at - lease.due_at).total_seconds()
        metrics.queue_lag.observe(max(lag, 0.0))


def recorded(outcome: Outcome) -> None:
    """A finished attempt was recorded: its one log line, and its counts."""
    match outcome:
        case Succeeded():
            _succeeded(outcome)
        case Confirmed() | NotKept():
            _confirmed(outcome)
        case Retried() | Deferred() | Died():
            _failed(outcome)
        case HandedBack():
            _released(outcome)
        case Expired():
            _reclaimed(outcome)
        case _:
            assert_never(outcome)


def _succeeded(outcome: Succeeded) -> None:
    lease, fetched = outcome.lease, outcome.fetched
    fields = _fields(
        "job.changed" if outcome.changed else "job.succeeded",
        lease,
        status=JobStatus.SUCCEEDED,
        outcome=AttemptOutcome.SUCCEEDED,
        http_status=fetched.http_status,
        duration_ms=outcome.duration_ms,
    )
    version = lease.previous.version + 1 if lease.previous else 1
    log.info(
        "%s succeeded: HTTP %d, %s%s%s",
        _attempt(lease),
        fetched.http_status,
        counted(fetched.bytes, "byte"),
        f", changed: version {version} stored" if outcome.changed else "",
        _next_refresh(outcome.refresh_at),
        extra=fields,
    )
    _count_success(outcome, AttemptOutcome.SUCCEEDED)


def _confirmed(outcome: Confirmed | NotKept) -> None:
    lease = outcome.lease
    match outcome:
        case NotKept():
            event, http_status = "job.not_kept", outcome.http_status
            how = f"HTTP {http_status}, {outcome.message}"
        case Confirmed():
            event, http_status = "job.unchanged", outcome.unmodified.http_status
            if outcome.ended is AttemptOutcome.NOT_MODIFIED:
                how = "not modified (HTTP 304)"
            else:
                how = f"unchanged (HTTP {http_status}, same text)"
        case _:
            assert_never(outcome)
    fields = _fields(
        event,
        lease,
        status=JobStatus.SUCCEEDED,
        outcome=outcome.ended,
        http_status=http_status,
        duration_ms=outcome.duration_ms,
    )
    version = lease.previous.version if lease.previous else 1
    log.info(
        "%s succeeded: %s, version %d kept%s",
        _attempt(lease),
        how,
        version,
        _next_refresh(outcome.refresh_at),
        extra=fields,
    )
    _count_success(outcome, outcome.ended)


def _next_refresh(refresh_at: datetime | None) -> str:
    return "" if refresh_at is None else f"; refreshes at {timestamp(refresh_at)}"


def _count_success(outcome: Outcome, ended: AttemptOutcome) -> None:
    if (metrics := _metrics.get()) is not None:
        metrics.attempts.labels(ended, "").inc()
        metrics.fetch_duration.labels(ended).observe(outcome.duration_ms / 1000)
        metrics.finished.labels(JobStatus.SUCCEEDED, "").inc()


def _failed(outcome: Retried | Deferred | Died) -> None:
    lease, failure = outcome.lease, outcome.failure
    deferrals = lease.deferrals
    dead: DeadReason | None = None
    match outcome:
        case Retried():
            then, after = _will_retry(outcome.retry_at, outcome.delay_seconds)
        case Deferred():
            then, after = _will_retry(outcome.retry_at, outcome.delay_seconds)
            then += f", attempt not spent (deferral {outcome.deferral})"
            deferrals = outcome.deferral.number
        case Died():
            dead = outcome.reason
            then = f"dead ({dead})"
            after = {"status": JobStatus.DEAD, "dead_reason": dead}
        case _:
            assert_never(outcome)
    failed = f"failed: {failure.label} ({failure.kind})"
    line = f"{_attempt(lease)} {failed}; {then}"
    fields = _fields(
        "job.failed",
        lease,
        **_failure(failure),
        **after,
        deferrals=deferrals,
        duration_ms=outcome.duration_ms,
    )
    if failure.unexpected is not None:
        # Not a known case: a bug, or a new failure to classify. The trace says which.
        log.error(
            "%s [unexpected %s]", line, failure.type, exc_info=failure.unexpected, extra=fields
        )
    else:
        log.info("%s", line, extra=fields)
    if (metrics := _metrics.get()) is not None:
        ended = AttemptOutcome(failure.kind)
        metrics.attempts.labels(ended, failure.type).inc()
        metrics.fetch_duration.labels(ended).observe(outcome.duration_ms / 1000)
        if dead is not None:
            metrics.finished.labels(JobStatus.DEAD, dead).inc()


def _will_retry(retry_at: datetime, delay_seconds: float) -> tuple[str, dict[str, Any]]:
    at = timestamp(retry_at)
    then = f"will retry at {at} (in {seconds(delay_seconds)})"
    return then, {"status": JobStatus.PENDING, "next_retry_at": at}


def _reclaimed(outcome: Expired) -> None:
    """A lease expired and this worker took the job back."""
    dead = outcome.dead
    then = "dead (lease_expired)" if dead else "will retry now"
    after: dict[str, Any] = {"status": JobStatus.PENDING}
    if dead:
        after = {"status": JobStatus.DEAD, "dead_reason": DeadReason.LEASE_EXPIRED}
    fields = _fields(
        "job.reclaimed",
        outcome.lease,
        outcome=AttemptOutcome.INTERRUPTED,
        error_kind="transient",
        error_type="LeaseExpired",
        **after,
    )
    log.warning("%s interrupted: lease expired; %s", _attempt(outcome.lease), then, extra=fields)
    if (metrics := _metrics.get()) is not None:
        metrics.attempts.labels(AttemptOutcome.INTERRUPTED, "LeaseExpired").inc()
        if dead:
            metrics.finished.labels(JobStatus.DEAD, DeadReason.LEASE_EXPIRED).inc()


def _released(outcome: HandedBack) -> None:
    fields = _fields(
        "job.released", outcome.lease, status=JobStatus.PENDING, outcome=AttemptOutcome.INTERRUPTED
    )
    log.info(
        "%s interrupted: %s; handed back, due now, attempt not spent",
        _attempt(outcome.lease),
        outcome.message,
        extra=fields,
    )
    if (metrics := _metrics.get()) is not None:
        metrics.attempts.labels(AttemptOutcome.INTERRUPTED, "").inc()


def lease_lost(outcome: Outcome) -> None:
    """The fetch ended after another worker took the job back; its outcome is dropped.

    The attempt was counted (interrupted) by whoever took the job back; the fetch is timed.
    """
    ended: dict[str, Any]
    match outcome:
        case Succeeded():
            ended = {"outcome": outcome.ended, "http_status": outcome.fetched.http_status}
        case Confirmed():
            ended = {"outcome": outcome.ended, "http_status": outcome.unmodified.http_status}
        case NotKept():
            ended = {"outcome": outcome.ended, "http_status": outcome.http_status}
        case Retried() | Deferred() | Died() | Expired():
            ended = _failure(outcome.failure)
        case HandedBack():
            ended = {"outcome": outcome.ended}
        case _:
            assert_never(outcome)
    fields = _fields("job.lease_lost", outcome.lease, **ended, duration_ms=outcome.duration_ms)
    log.warning(
        "%s finished after its lease was taken back; outcome discarded",
        _attempt(outcome.lease),
        extra=fields,
    )
    if (metrics := _metrics.get()) is not None:
        metrics.fetch_duration.labels(ended["outcome"]).observe(outcome.duration_ms / 1000)


def domain_paused(domain: str, pause: DomainPause, consecutive_failures: int) -> None:
    """`pause` is the one now stored for `domain` (never one the store kept a longer pause
    over); `consecutive_failures` is the domain's streak as this pause was decided."""
    fields = {
        "event": "domain.paused",
        "domain": domain,
        "paused_until": timestamp(pause.until),
        "reason": pause.reason,
        "consecutive_failures": consecutive_failures,
    }
    log.warning(
        "domain %s paused until %s (%s), after %s",
        domain,
        timestamp(pause.until),
        pause.reason,
        counted(consecutive_failures, "consecutive failure"),
        extra=carrying(fields),
    )
    if (metrics := _metrics.get()) is not None:
        metrics.domain_pauses.inc()


def delivered(claimed: ClaimedDelivery, duration_ms: int) -> None:
    """A callback POST was answered 2xx: the delivery is done."""
    fields = _delivery(
        "delivery.delivered",
        claimed,
        status=DeliveryStatus.DELIVERED,
        outcome="delivered",
        duration_ms=duration_ms,
    )
    webhooks_log.info(
        "delivery %d of job %s: %s delivered (attempt %d/%d)",
        claimed.id,
        claimed.job_id,
        claimed.event,
        claimed.attempt,
        claimed.max_attempts,
        extra=carrying(fields),
    )
    _count_delivery("delivered", duration_ms)


def delivery_failed(
    claimed: ClaimedDelivery, failure: Failure, retry_at: datetime | None, duration_ms: int
) -> None:
    """A callback POST failed: the delivery is tried again at `retry_at`, or dead (None)."""
    after: dict[str, Any] = {"status": DeliveryStatus.DEAD}
    then = "dead"
    if retry_at is not None:
        then = f"will retry at {timestamp(retry_at)}"
        after = {"status": DeliveryStatus.PENDING, "next_retry_at": timestamp(retry_at)}
    fields = _delivery(
        "delivery.failed",
        claimed,
        **after,
        outcome=failure.kind,
        error_kind=failure.kind,
        error_type=failure.type,
        http_status=failure.http_status,
        duration_ms=duration_ms,
    )
    webhooks_log.warning(
        "delivery %d of job %s: %s failed (attempt %d/%d): %s (%s); %s",
        claimed.id,
        claimed.job_id,
        claimed.event,
        claimed.attempt,
        claimed.max_attempts,
        failure.label,
        failure.kind,
        then,
        exc_info=failure.unexpected,  # not a known case: the trace says what it was
        extra=carrying(fields),
    )
    _count_delivery("dead" if retry_at is None else "retrying", duration_ms)


def _delivery(event: str, claimed: ClaimedDelivery, **values: Any) -> dict[str, Any]:
    fields = dict.fromkeys(DELIVERY_FIELDS)
    fields |= {
        "event": event,
        "job_id": claimed.job_id,
        "delivery_id": claimed.id,
        "callback_event": claimed.event,
        "attempt": claimed.attempt,
        "max_attempts": claimed.max_attempts,
    }
    fields.update(values)
    return fields


def _count_delivery(outcome: str, duration_ms: int) -> None:
    if (metrics := _metrics.get()) is not None:
        metrics.webhook_deliveries.labels(outcome).inc()
        metrics.webhook_duration.labels(outcome).observe(duration_ms / 1000)


def loop_started(name: str) -> None:
    """A background loop (worker, webhooks) began: `ingest_worker_up` is 1 until it stops."""
    if (metrics := _metrics.get()) is not None:
        metrics.loop_up.labels(name).set(1)


def loop_ticked(name: str) -> None:
    """A pass of the loop ended without error (no log line: there is one every poll)."""
    if (metrics := _metrics.get()) is not None:
        metrics.loop_last_tick.labels(name).set(time.time())


def loop_stopped(name: str) -> None:
    if (metrics := _metrics.get()) is not None:
        metrics.loop_up.labels(name).set(0)
