"""Rate-limited answers: Retry-After parsing and deferral accounting (pure)."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.model import DeadReason, Deferral, ErrorKind, Failure, MarkDead, Reschedule
from app.rules.policy import RetryRules, classify_status, decide, parse_retry_after
from tests.support.rules import RETRY

NOW = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
CODES = frozenset({408, *range(500, 600)})


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("120", 120.0),
        ("0", 0.0),
        (" 7 ", 7.0),
        ("Mon, 30 Nov 2026 12:02:00 GMT", 120.0),
        ("Monday, 30-Nov-26 12:00:30 GMT", 30.0),
        ("Mon Nov 30 12:01:00 2026", None),  # asctime form carries no zone: not trusted
        ("99999999", 3600.0),
        ("Tue, 01 Dec 2026 12:00:00 GMT", 3600.0),
        ("-5", None),
        ("1.5", None),
        ("soon", None),
        ("", None),
        ("Mon, 30 Nov 2026 11:00:00 GMT", None),
        (None, None),
        ("²", None),  # a digit to str.isdigit, not to float
        ("١٢", None),  # Arabic-Indic digits
        (" 12 ", 12.0),
        ("-1", None),
        ("1e3", None),
        ("9" * 5000, 3600.0),
    ],
)
def test_parse_retry_after(header, seconds):
    """Delta-seconds and HTTP-dates are read and capped; negative, past or bad ones ignored."""
    assert seconds == parse_retry_after(header, NOW, cap=3600)


@pytest.mark.parametrize(
    ("status", "retry_after", "kind"),
    [
        (429, None, ErrorKind.RATE_LIMITED),
        (429, "10", ErrorKind.RATE_LIMITED),
        (503, "10", ErrorKind.RATE_LIMITED),
        (503, None, ErrorKind.TRANSIENT),
        (500, "10", ErrorKind.TRANSIENT),
        (404, "10", ErrorKind.FATAL),
    ],
)
def test_429_and_503_with_retry_after_are_rate_limited(status, retry_after, kind):
    """429 always, and 503 only with Retry-After, is rate_limited."""
    failure = classify_status(status, CODES, retry_after)
    assert failure is not None
    assert kind == failure.kind


def test_rate_limited_failure_keeps_the_header():
    """The Retry-After header travels with the failure to the decision."""
    failure = classify_status(429, CODES, "Mon, 30 Nov 2026 12:02:00 GMT")
    assert failure is not None
    assert "Mon, 30 Nov 2026 12:02:00 GMT" == failure.retry_after


def rules(**changes) -> RetryRules:
    return replace(RETRY, **changes)


def limited(retry_after: str | None = None) -> Failure:
    return Failure(ErrorKind.RATE_LIMITED, "HTTPStatus", "HTTP 429", 429, retry_after)


def test_deferral_waits_what_the_server_asks_and_spends_nothing():
    """Retry-After longer than the backoff wins, and the attempt is given back."""
    decision = decide(limited("120"), 1, 4, 0, NOW, rules())
    expected = Reschedule(
        NOW + timedelta(seconds=120), 120.0, limited("120"), False, Deferral(1, 20)
    )
    assert expected == decision


def test_deferral_waits_at_least_the_backoff():
    """A Retry-After shorter than the backoff for this deferral waits the backoff."""
    decision = decide(limited("1"), 1, 4, 2, NOW, rules())
    expected = Reschedule(NOW + timedelta(seconds=120), 120.0, limited("1"), False, Deferral(3, 20))
    assert expected == decision


def test_deferral_ignores_the_attempt_budget():
    """On the last attempt of the budget a 429 is still a deferral, not a death."""
    decision = decide(limited("5"), 4, 4, 0, NOW, rules())
    assert isinstance(decision, Reschedule)
    assert not limited().spends_attempt


@pytest.mark.parametrize(("deferrals", "dead"), [(0, False), (19, False), (20, True), (25, True)])
def test_max_deferrals_bounds_the_deferrals(deferrals, dead):
    """The answer that would make deferrals exceed the maximum kills the job."""
    decision = decide(limited(), 1, 4, deferrals, NOW, rules(max_deferrals=20))
    assert dead == (decision == MarkDead(DeadReason.RATE_LIMITED, limited(), False))


def test_zero_deferrals_allowed_means_the_first_429_is_fatal():
    """With INGEST_MAX_DEFERRALS=0 a server is asked once."""
    assert MarkDead(DeadReason.RATE_LIMITED, limited("1"), False) == decide(
        limited("1"), 1, 4, 0, NOW, rules(max_deferrals=0)
    )


def test_retry_after_is_capped_by_the_setting():
    """A server asking for a day waits at most INGEST_RETRY_AFTER_MAX_SECONDS."""
    decision = decide(limited("86400"), 1, 4, 0, NOW, rules(retry_after_max_seconds=600))
    assert isinstance(decision, Reschedule)
    assert 600.0 == decision.delay_seconds
