"""app.observability.events: each transition's text line, its JSON event field by field,
its counts."""

import json
import logging
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.model import (
    ClaimedDelivery,
    DeadReason,
    Deferral,
    DomainPause,
    ErrorKind,
    Failure,
    Fetched,
    HandedBack,
    Lease,
    MarkDead,
    Reschedule,
)
from app.observability import events
from app.observability.metrics import Metrics, exposition
from app.rules.policy import expired, handed_back, yielded
from tests.support.outcomes import failed, succeeded

NOW = datetime(2026, 11, 30, 3, 12, 4, 411000, tzinfo=UTC)
LEASE = Lease(
    id="job-1",
    url="https://example.com/a",
    domain="example.com",
    tenant="shop",
    attempt=2,
    max_attempts=4,
    deferrals=0,
    worker_id="w",
    lease_id="0" * 32,
    claimed_at=NOW,
    due_at=NOW - timedelta(seconds=3),
)
RESULT = Fetched(200, "https://example.com/a", "text/html", 1256, "0" * 64, "A page")
HTTP_503 = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 503", 503)


@pytest.fixture(autouse=True)
def _info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="ingest")


def as_json(record: logging.LogRecord) -> dict:
    return json.loads(events.JsonFormatter().format(record))


def counted(metrics: Metrics) -> dict[tuple[str, tuple], float]:
    text = exposition(metrics, None).decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if not sample.name.endswith("_created")
    }


def test_success_event(caplog):
    """A success: its sentence, and a JSON event with every job field."""
    events.recorded(succeeded(LEASE, RESULT, 52))
    [record] = caplog.records
    assert "job job-1 attempt 2/4 succeeded: HTTP 200, 1256 bytes" == record.getMessage()
    assert {
        "level": "INFO",
        "logger": "ingest.worker",
        "message": "job job-1 attempt 2/4 succeeded: HTTP 200, 1256 bytes",
        "event": "job.succeeded",
        "job_id": "job-1",
        "tenant": "shop",
        "domain": "example.com",
        "attempt": 2,
        "max_attempts": 4,
        "status": "succeeded",
        "outcome": "succeeded",
        "error_kind": None,
        "error_type": None,
        "http_status": 200,
        "next_retry_at": None,
        "dead_reason": None,
        "deferrals": 0,
        "duration_ms": 52,
    } == {k: v for k, v in as_json(record).items() if k != "time"}


def test_rescheduled_failure_event(caplog):
    """A transient failure that will be retried: pending, next_retry_at, no dead_reason."""
    decision = Reschedule(NOW + timedelta(seconds=60), 60.0, HTTP_503)
    events.recorded(failed(LEASE, decision, 7))
    [record] = caplog.records
    line = as_json(record)
    assert (
        "job job-1 attempt 2/4 failed: HTTP 503 (transient); "
        "will retry at 2026-11-30T03:13:04.411Z (in 60s)"
    ) == line["message"]
    expected = {
        "event": "job.failed",
        "status": "pending",
        "outcome": "transient",
        "error_kind": "transient",
        "error_type": "HTTPStatus",
        "http_status": 503,
        "next_retry_at": "2026-11-30T03:13:04.411Z",
        "dead_reason": None,
        "deferrals": 0,
        "duration_ms": 7,
    }
    assert expected == {k: line[k] for k in expected}


def test_dead_failure_event(caplog):
    """A failure that kills the job: dead, its reason, no next_retry_at."""
    gone = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
    events.recorded(failed(LEASE, MarkDead(DeadReason.FATAL, gone), 3))
    [record] = caplog.records
    line = as_json(record)
    assert "job job-1 attempt 2/4 failed: HTTP 404 (fatal); dead (fatal)" == line["message"]
    expected = {"status": "dead", "outcome": "fatal", "dead_reason": "fatal", "next_retry_at": None}
    assert expected == {k: line[k] for k in expected}


def test_rate_limited_event_counts_the_deferral(caplog):
    """A rate-limited answer that defers the job reports the deferral it used."""
    limited = Failure(ErrorKind.RATE_LIMITED, "HTTPStatus", "HTTP 429", 429)
    decision = Reschedule(
        NOW + timedelta(seconds=120), 120.0, limited, spends_attempt=False, deferral=Deferral(1, 20)
    )
    events.recorded(failed(LEASE, decision, 4))
    [record] = caplog.records
    line = as_json(record)
    assert line["message"].endswith("(in 120s), attempt not spent (deferral 1/20)")
    assert ("rate_limited", "rate_limited", 1) == (
        line["outcome"],
        line["error_kind"],
        line["deferrals"],
    )


def test_unexpected_failure_carries_its_traceback(caplog):
    """An unclassified exception logs at ERROR, and the JSON line has its traceback."""
    try:
        raise KeyError("boom")
    except KeyError as exc:
        odd = Failure(ErrorKind.FATAL, "KeyError", "'boom'", unexpected=exc)
    events.recorded(failed(LEASE, MarkDead(DeadReason.FATAL, odd), 1))
    [record] = caplog.records
    line = as_json(record)
    assert ("ERROR", "KeyError") == (line["level"], line["error_type"])
    assert "KeyError: 'boom'" in line["traceback"]


def test_reclaimed_released_and_lost_events(caplog):
    """Interruptions: taken back (pending or dead), handed back, finished too late."""
    last = replace(LEASE, id="job-2", attempt=4)
    events.recorded(expired(last, NOW))
    events.recorded(handed_back(LEASE, NOW))
    events.lease_lost(succeeded(LEASE, RESULT, 90))
    reclaimed, released, lost = (as_json(r) for r in caplog.records)
    assert (
        "job job-2 attempt 4/4 interrupted: lease expired; dead (lease_expired)"
        == (reclaimed["message"])
    )
    assert ("job.reclaimed", "dead", "lease_expired", "interrupted", "LeaseExpired") == (
        reclaimed["event"],
        reclaimed["status"],
        reclaimed["dead_reason"],
        reclaimed["outcome"],
        reclaimed["error_type"],
    )
    assert ("shop", "example.com") == (reclaimed["tenant"], reclaimed["domain"])
    assert ("job.released", "pending", "interrupted") == (
        released["event"],
        released["status"],
        released["outcome"],
    )
    assert ("job.lease_lost", None, "succeeded", 90) == (
        lost["event"],
        lost["status"],
        lost["outcome"],
        lost["duration_ms"],
    )


def test_hand_backs_say_why(caplog):
    """A shutdown's hand-back and a priority's read apart; both give the attempt back."""
    events.recorded(handed_back(LEASE, NOW))
    events.recorded(yielded(LEASE, NOW))
    shutdown, priority = (as_json(r)["message"] for r in caplog.records)
    assert shutdown.endswith(
        "interrupted: worker shutting down; handed back, due now, attempt not spent"
    )
    assert priority.endswith(
        "interrupted: a job of a higher priority was submitted; handed back, due now, "
        "attempt not spent"
    )
    for outcome in (handed_back(LEASE, NOW), yielded(LEASE, NOW)):
        assert isinstance(outcome, HandedBack)


def test_domain_pause_event(caplog):
    """A domain pause: its sentence and its own event, with the streak that paused it."""
    events.domain_paused("example.com", DomainPause(NOW, "HTTP 500, backoff 40s"), 3)
    [record] = caplog.records
    line = as_json(record)
    assert (
        "domain example.com paused until 2026-11-30T03:12:04.411Z (HTTP 500, backoff 40s), "
        "after 3 consecutive failures"
    ) == line["message"]
    assert ("domain.paused", "example.com", "HTTP 500, backoff 40s", 3) == (
        line["event"],
        line["domain"],
        line["reason"],
        line["consecutive_failures"],
    )


def test_counts_of_one_read_in_the_singular(caplog):
    """A one-byte body and a pause after one failure say "1 byte" and "1 consecutive
    failure"."""
    tiny = replace(RESULT, bytes=1)
    events.recorded(succeeded(LEASE, tiny, 5))
    events.domain_paused("example.com", DomainPause(NOW, "HTTP 429, backoff 10s"), 1)
    success, pause = (record.getMessage() for record in caplog.records)
    assert "job job-1 attempt 2/4 succeeded: HTTP 200, 1 byte" == success
    assert pause.endswith("(HTTP 429, backoff 10s), after 1 consecutive failure")


def test_plain_records_have_no_event_fields():
    """A record that is no transition is time, level, logger and message only."""
    record = logging.LogRecord(
        "ingest.worker", logging.INFO, __file__, 1, "worker %s up", ("w",), None
    )
    line = json.loads(events.JsonFormatter().format(record))
    assert ["level", "logger", "message", "time"] == sorted(line)
    assert "worker w up" == line["message"]


def test_transitions_count_into_the_metrics_in_force():
    """Counts go to the metrics of the context, and nowhere outside one."""
    metrics = Metrics()
    events.recorded(succeeded(LEASE, RESULT, 10))  # outside: counted nowhere
    with events.counting(metrics):
        events.jobs_submitted(3)
        events.job_started(LEASE)
        events.recorded(succeeded(LEASE, RESULT, 250))
        events.recorded(failed(LEASE, MarkDead(DeadReason.RETRIES_EXHAUSTED, HTTP_503), 20))
        events.recorded(expired(replace(LEASE, id="job-2", attempt=1), NOW))
        events.domain_paused("example.com", DomainPause(NOW, "HTTP 429"), 1)
    events.jobs_submitted(5)  # outside again
    got = counted(metrics)
    assert 3 == got[("ingest_jobs_submitted_total", ())]
    assert 1 == got[("ingest_attempts_total", (("error_type", ""), ("outcome", "succeeded")))]
    assert (
        1
        == got[("ingest_attempts_total", (("error_type", "HTTPStatus"), ("outcome", "transient")))]
    )
    assert (
        1
        == got[
            ("ingest_attempts_total", (("error_type", "LeaseExpired"), ("outcome", "interrupted")))
        ]
    )
    assert 1 == got[("ingest_jobs_finished_total", (("dead_reason", ""), ("status", "succeeded")))]
    finished_dead = (("dead_reason", "retries_exhausted"), ("status", "dead"))
    assert 1 == got[("ingest_jobs_finished_total", finished_dead)]
    assert 1 == got[("ingest_domain_pauses_total", ())]
    assert 1 == got[("ingest_queue_lag_seconds_count", ())]
    assert 3.0 == got[("ingest_queue_lag_seconds_sum", ())]
    assert 0.25 == got[("ingest_fetch_duration_seconds_sum", (("outcome", "succeeded"),))]
    assert 0 == got[("ingest_database_up", ())]


def test_configure_logging_json_writes_one_object_per_line(capsys):
    """INGEST_LOG_FORMAT=json: stderr gets one JSON object per record."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        events.configure_logging("INFO", "json")
        events.recorded(succeeded(LEASE, RESULT, 5))
        logging.getLogger("ingest.api").warning("plain")
    finally:
        root.handlers[:], _ = saved
        root.setLevel(saved[1])
    lines = capsys.readouterr().err.splitlines()
    assert ["job.succeeded", None] == [json.loads(line).get("event") for line in lines]


CLAIMED = ClaimedDelivery(7, "job-1", "job.succeeded", "https://hooks.example/x", 2, 8)


def test_delivery_events(caplog):
    """A delivered callback, one to retry and a dead one: their sentences, and JSON events
    with every delivery field."""
    refused = Failure(ErrorKind.TRANSIENT, "HTTPStatus", "HTTP 500", 500)
    gone = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 410", 410)
    events.delivered(CLAIMED, 31)
    events.delivery_failed(CLAIMED, refused, NOW, 12)
    events.delivery_failed(CLAIMED, gone, None, 9)
    delivered, retrying, dead = (as_json(record) for record in caplog.records)
    common = {
        "level": "INFO",
        "logger": "ingest.webhooks",
        "job_id": "job-1",
        "delivery_id": 7,
        "callback_event": "job.succeeded",
        "attempt": 2,
        "max_attempts": 8,
    }
    assert {
        **common,
        "message": "delivery 7 of job job-1: job.succeeded delivered (attempt 2/8)",
        "event": "delivery.delivered",
        "status": "delivered",
        "outcome": "delivered",
        "error_kind": None,
        "error_type": None,
        "http_status": None,
        "next_retry_at": None,
        "duration_ms": 31,
    } == {key: value for key, value in delivered.items() if key != "time"}
    assert {
        **common,
        "level": "WARNING",
        "message": "delivery 7 of job job-1: job.succeeded failed (attempt 2/8): HTTP 500 "
        "(transient); will retry at 2026-11-30T03:12:04.411Z",
        "event": "delivery.failed",
        "status": "pending",
        "outcome": "transient",
        "error_kind": "transient",
        "error_type": "HTTPStatus",
        "http_status": 500,
        "next_retry_at": "2026-11-30T03:12:04.411Z",
        "duration_ms": 12,
    } == {key: value for key, value in retrying.items() if key != "time"}
    assert ("dead", None, "fatal", 410) == (
        dead["status"],
        dead["next_retry_at"],
        dead["outcome"],
        dead["http_status"],
    )
    assert dead["message"].endswith("HTTP 410 (fatal); dead")
    assert set(events.DELIVERY_FIELDS) <= set(dead)


def test_deliveries_and_loops_count_into_the_metrics_in_force():
    """Deliveries by outcome with their durations; a loop is up from start to stop, and
    its last good tick is a unix time."""
    metrics = Metrics()
    with events.counting(metrics):
        events.delivered(CLAIMED, 250)
        events.delivery_failed(CLAIMED, HTTP_503, NOW, 10)
        events.delivery_failed(CLAIMED, HTTP_503, None, 10)
        events.loop_started("worker")
        events.loop_started("webhooks")
        events.loop_ticked("worker")
        running = counted(metrics)
        events.loop_stopped("webhooks")
    got = counted(metrics)
    deliveries = "ingest_webhook_deliveries_total"
    assert (1, 1, 1) == tuple(
        got[(deliveries, (("outcome", outcome),))] for outcome in ("delivered", "retrying", "dead")
    )
    duration = ("ingest_webhook_duration_seconds_sum", (("outcome", "delivered"),))
    assert 0.25 == got[duration]
    up = "ingest_worker_up"
    assert (1, 1) == (running[(up, (("loop", "worker"),))], running[(up, (("loop", "webhooks"),))])
    assert (1, 0) == (got[(up, (("loop", "worker"),))], got[(up, (("loop", "webhooks"),))])
    tick = got[("ingest_worker_last_tick_timestamp_seconds", (("loop", "worker"),))]
    assert abs(time.time() - tick) < 60
