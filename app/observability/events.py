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
from typing import Any

from app.model import (
    AttemptOutcome,
    ClaimedDelivery,
    Complete,
    Confirm,
    DeadReason,
    DeliveryStatus,
    DomainPause,
    Failure,
    JobStatus,
    Lease,
    MarkDead,
    Outcome,
    Reschedule,
    Transition,
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
    decision, transition = outcome.decision, outcome.transition
    if transition is Transition.SUCCEEDED:
        assert isinstance(decision, Complete)
        _succeeded(outcome, decision)
    elif transition in (Transition.CONFIRMED, Transition.NOT_KEPT):
        assert isinstance(decision, Confirm)
        _confirmed(outcome, decision)
    elif transition is Transition.HANDED_BACK:
        _released(outcome)
    elif transition is Transition.LEASE_EXPIRED:
        _reclaimed(outcome)
    else:
        assert isinstance(decision, Reschedule | MarkDead)
        _failed(outcome, decision)


def _succeeded(outcome: Outcome, decision: Complete) -> None:
    lease, fetched = outcome.lease, decision.fetched
    fields = _fields(
        "job.changed" if decision.changed else "job.succeeded",
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
        f", changed: version {version} stored" if decision.changed else "",
        _next_refresh(decision.refresh_at),
        extra=fields,
    )
    _count_success(outcome, AttemptOutcome.SUCCEEDED)


def _confirmed(outcome: Outcome, decision: Confirm) -> None:
    lease, unmodified = outcome.lease, decision.unmodified
    not_kept = outcome.transition is Transition.NOT_KEPT
    fields = _fields(
        "job.not_kept" if not_kept else "job.unchanged",
        lease,
        status=JobStatus.SUCCEEDED,
        outcome=outcome.ended,
        http_status=unmodified.http_status,
        duration_ms=outcome.duration_ms,
    )
    if not_kept:
        how = f"HTTP {unmodified.http_status}, {outcome.message}"
    elif outcome.ended is AttemptOutcome.NOT_MODIFIED:
        how = "not modified (HTTP 304)"
    else:
        how = f"unchanged (HTTP {unmodified.http_status}, same text)"
    version = lease.previous.version if lease.previous else 1
    log.info(
        "%s succeeded: %s, version %d kept%s",
        _attempt(lease),
        how,
        version,
        _next_refresh(decision.refresh_at),
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


def _failed(outcome: Outcome, decision: Reschedule | MarkDead) -> None:
    lease, failure = outcome.lease, decision.failure
    assert failure is not None  # only a hand-back has none
    deferrals = lease.deferrals
    if isinstance(decision, Reschedule):
        assert decision.retry_at is not None
        then = (
            f"will retry at {timestamp(decision.retry_at)} (in {seconds(decision.delay_seconds)})"
        )
        if decision.deferral is not None:
            then += f", attempt not spent (deferral {decision.deferral})"
            deferrals = decision.deferral.number
        after = {"status": JobStatus.PENDING, "next_retry_at": timestamp(decision.retry_at)}
    else:
        then = f"dead ({decision.reason})"
        after = {"status": JobStatus.DEAD, "dead_reason": decision.reason}
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
        if isinstance(decision, MarkDead):
            metrics.finished.labels(JobStatus.DEAD, decision.reason).inc()


def _reclaimed(outcome: Outcome) -> None:
    """A lease expired and this worker took the job back."""
    dead = isinstance(outcome.decision, MarkDead)
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


def _released(outcome: Outcome) -> None:
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
    decision = outcome.decision
    if isinstance(decision, Complete):
        ended = {"outcome": AttemptOutcome.SUCCEEDED, "http_status": decision.fetched.http_status}
    elif isinstance(decision, Confirm):
        ended = {"outcome": outcome.ended, "http_status": decision.unmodified.http_status}
    elif decision.failure is not None:
        ended = _failure(decision.failure)
    else:
        ended = {"outcome": outcome.ended}
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
