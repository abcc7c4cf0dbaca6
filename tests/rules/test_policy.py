"""app.rules.policy: classification of exceptions and statuses, the backoff formula, decide()."""

import socket
import ssl
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import httpcore
import httpx
import pytest

from app.fetch.fetcher import FetchTimeout
from app.model import (
    AttemptOutcome,
    Confirmed,
    DeadReason,
    Deferred,
    Died,
    DomainPause,
    DomainSignal,
    ErrorKind,
    Expired,
    Failure,
    Fetched,
    HandedBack,
    Lease,
    MarkDead,
    Previous,
    Reschedule,
    Retried,
    Succeeded,
    Unmodified,
)
from app.rules.policy import (
    RetryRules,
    backoff_delay,
    classify_exception,
    classify_status,
    decide,
    domain_pause,
    expired,
    handed_back,
    settle,
    unsettled,
    yielded,
)
from app.settings import DEFAULT_TRANSIENT_ERRORS, Settings
from tests.support.rules import RETRY

TRANSIENT = ErrorKind.TRANSIENT
RATE_LIMITED = ErrorKind.RATE_LIMITED
FATAL = ErrorKind.FATAL
NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def raised_from(exc: BaseException, cause: BaseException) -> BaseException:
    """`exc` after `raise exc from cause`, the way httpx and httpcore chain their errors."""
    try:
        raise exc from cause
    except BaseException as caught:
        return caught


def raised_during(exc: BaseException, context: BaseException) -> BaseException:
    """`exc` raised while `context` was being handled (implicit chaining, no `from`)."""
    try:
        try:
            raise context
        except BaseException:
            raise exc  # noqa: B904 - the implicit chain is what is being built
    except BaseException as caught:
        return caught


def gaierror(code: int) -> socket.gaierror:
    return socket.gaierror(code, f"gaierror {code}")


def httpx_connect_error(cause: BaseException) -> BaseException:
    """A ConnectError chained exactly as a real fetch chains it: httpx <- httpcore <- OS."""
    inner = raised_from(httpcore.ConnectError(str(cause)), cause)
    return raised_from(httpx.ConnectError(str(cause)), inner)


EAI_NODATA = getattr(socket, "EAI_NODATA", None)
needs_eai_nodata = pytest.mark.skipif(EAI_NODATA is None, reason="no EAI_NODATA here")

# (exception, kind, type) for every branch of the tree in the rules/policy.py docstring.
EXCEPTION_CASES = [
    pytest.param(httpx.ConnectTimeout("t"), TRANSIENT, "ConnectTimeout", id="ConnectTimeout"),
    pytest.param(httpx.ReadTimeout("t"), TRANSIENT, "ReadTimeout", id="ReadTimeout"),
    pytest.param(httpx.WriteTimeout("t"), TRANSIENT, "WriteTimeout", id="WriteTimeout"),
    pytest.param(httpx.PoolTimeout("t"), TRANSIENT, "PoolTimeout", id="PoolTimeout"),
    pytest.param(httpx.ConnectError("x"), TRANSIENT, "ConnectError", id="ConnectError-plain"),
    pytest.param(
        raised_from(httpx.ConnectError("x"), ConnectionRefusedError(111, "refused")),
        TRANSIENT,
        "ConnectError",
        id="ConnectError-refused",
    ),
    pytest.param(
        raised_from(httpx.ConnectError("x"), gaierror(socket.EAI_NONAME)),
        FATAL,
        "NameNotFound",
        id="ConnectError-EAI_NONAME",
    ),
    pytest.param(
        raised_from(httpx.ConnectError("x"), gaierror(EAI_NODATA or 0)),
        FATAL,
        "NameNotFound",
        id="ConnectError-EAI_NODATA",
        marks=needs_eai_nodata,
    ),
    pytest.param(
        httpx_connect_error(gaierror(socket.EAI_NONAME)),
        FATAL,
        "NameNotFound",
        id="ConnectError-via-httpcore-EAI_NONAME",
    ),
    pytest.param(
        raised_during(httpx.ConnectError("x"), gaierror(socket.EAI_NONAME)),
        FATAL,
        "NameNotFound",
        id="ConnectError-context-EAI_NONAME",
    ),
    pytest.param(
        raised_from(httpx.ConnectError("x"), gaierror(socket.EAI_AGAIN)),
        TRANSIENT,
        "ConnectError",
        id="ConnectError-EAI_AGAIN",
    ),
    pytest.param(
        raised_from(httpx.ConnectError("x"), ssl.SSLCertVerificationError(1, "bad cert")),
        FATAL,
        "CertificateError",
        id="ConnectError-SSLCertVerificationError",
    ),
    pytest.param(
        httpx_connect_error(ssl.SSLCertVerificationError(1, "bad cert")),
        FATAL,
        "CertificateError",
        id="ConnectError-via-httpcore-SSLCertVerificationError",
    ),
    pytest.param(
        raised_from(httpx.ConnectError("x"), ssl.SSLError(1, "handshake failure")),
        TRANSIENT,
        "ConnectError",
        id="ConnectError-other-SSLError",
    ),
    pytest.param(httpx.ReadError("x"), TRANSIENT, "ReadError", id="ReadError"),
    pytest.param(httpx.WriteError("x"), TRANSIENT, "WriteError", id="WriteError"),
    pytest.param(httpx.CloseError("x"), FATAL, "CloseError", id="CloseError"),
    pytest.param(
        httpx.RemoteProtocolError("x"), TRANSIENT, "RemoteProtocolError", id="RemoteProtocolError"
    ),
    pytest.param(
        httpx.LocalProtocolError("x"), FATAL, "LocalProtocolError", id="LocalProtocolError"
    ),
    pytest.param(
        httpx.UnsupportedProtocol("x"), FATAL, "UnsupportedProtocol", id="UnsupportedProtocol"
    ),
    pytest.param(httpx.ProxyError("x"), FATAL, "ProxyError", id="ProxyError"),
    pytest.param(httpx.InvalidURL("x"), FATAL, "InvalidURL", id="InvalidURL"),
    pytest.param(httpx.TooManyRedirects("x"), FATAL, "TooManyRedirects", id="TooManyRedirects"),
    pytest.param(FetchTimeout("x"), TRANSIENT, "FetchTimeout", id="FetchTimeout"),
]

UNKNOWN_EXCEPTIONS = [
    pytest.param(ValueError("boom"), id="ValueError"),
    pytest.param(RuntimeError("boom"), id="RuntimeError"),
    pytest.param(httpx.DecodingError("bad gzip"), id="httpx.DecodingError"),
    pytest.param(TimeoutError("builtin"), id="builtin-TimeoutError"),
]


@pytest.mark.parametrize(("exc", "kind", "type_"), EXCEPTION_CASES)
def test_classify_exception_follows_the_documented_tree(
    exc: BaseException, kind: ErrorKind, type_: str
) -> None:
    """Each documented exception gets its documented kind and type, and is not 'unexpected'."""
    failure = classify_exception(exc, DEFAULT_TRANSIENT_ERRORS)

    assert (kind, type_, None) == (failure.kind, failure.type, failure.unexpected)


@pytest.mark.parametrize("exc", UNKNOWN_EXCEPTIONS)
def test_unknown_exception_is_fatal_and_unexpected(exc: BaseException) -> None:
    """An exception outside the tree is fatal and carried along so its trace can be logged."""
    failure = classify_exception(exc, DEFAULT_TRANSIENT_ERRORS)

    assert (FATAL, type(exc).__name__, str(exc)) == (
        failure.kind,
        failure.type,
        failure.message,
    )
    assert exc is failure.unexpected


def test_message_is_the_exception_text() -> None:
    """The failure message is str(exc)."""
    failure = classify_exception(httpx.ReadTimeout("timed out reading"), DEFAULT_TRANSIENT_ERRORS)

    assert Failure(TRANSIENT, "ReadTimeout", "timed out reading") == failure


def test_message_falls_back_to_the_type_name() -> None:
    """An exception with no text gets its type name as message."""
    failure = classify_exception(httpx.ReadTimeout(""), DEFAULT_TRANSIENT_ERRORS)

    assert "ReadTimeout" == failure.message


def test_name_not_found_keeps_the_outer_message() -> None:
    """A NameNotFound failure carries the ConnectError's text, not the gaierror's."""
    exc = raised_from(
        httpx.ConnectError("[Errno -2] Name or service not known"), gaierror(socket.EAI_NONAME)
    )

    failure = classify_exception(exc, DEFAULT_TRANSIENT_ERRORS)

    assert Failure(FATAL, "NameNotFound", "[Errno -2] Name or service not known") == failure


@pytest.mark.parametrize(
    "exc",
    [
        pytest.param(httpx.ReadTimeout("t"), id="ReadTimeout"),
        pytest.param(httpx.ConnectError("x"), id="ConnectError"),
        pytest.param(FetchTimeout("x"), id="FetchTimeout"),
    ],
)
def test_transient_name_removed_from_the_set_becomes_fatal(exc: BaseException) -> None:
    """The transient set is the argument: a name left out of it is classified fatal."""
    name = type(exc).__name__
    names = tuple(n for n in DEFAULT_TRANSIENT_ERRORS if n != name)

    failure = classify_exception(exc, names)

    assert (FATAL, name) == (failure.kind, failure.type)


def test_any_name_in_the_set_is_transient() -> None:
    """A name added to the transient set makes that exception transient."""
    failure = classify_exception(ValueError("boom"), ("ValueError",))

    assert (TRANSIENT, "ValueError", None) == (failure.kind, failure.type, failure.unexpected)


def test_empty_transient_set_makes_everything_fatal() -> None:
    """With no transient names, even a read timeout is fatal."""
    failure = classify_exception(httpx.ReadTimeout("t"), ())

    assert FATAL == failure.kind


def test_name_not_found_is_fatal_even_if_connect_error_is_transient() -> None:
    """NXDOMAIN wins over the ConnectError name being in the transient set."""
    exc = raised_from(httpx.ConnectError("x"), gaierror(socket.EAI_NONAME))

    failure = classify_exception(exc, ("ConnectError",))

    assert (FATAL, "NameNotFound") == (failure.kind, failure.type)


def test_cyclic_cause_chain_terminates() -> None:
    """A cause chain that loops back on itself is walked once, not forever."""
    first, second = httpx.ConnectError("a"), httpx.ConnectError("b")
    first.__cause__, second.__cause__ = second, first

    failure = classify_exception(first, DEFAULT_TRANSIENT_ERRORS)

    assert Failure(TRANSIENT, "ConnectError", "a") == failure


# ---- classify_status -------------------------------------------------------------------

DEFAULT_CODES = Settings.model_fields["transient_status_codes"].default


@pytest.mark.parametrize("status", [200, 201, 204, 299])
def test_2xx_is_success(status: int) -> None:
    """Any 2xx answer is success (None)."""
    assert None is classify_status(status, DEFAULT_CODES)


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (100, FATAL),
        (301, FATAL),
        (304, FATAL),
        (400, FATAL),
        (401, FATAL),
        (403, FATAL),
        (404, FATAL),
        (410, FATAL),
        (422, FATAL),
        (408, TRANSIENT),
        (429, RATE_LIMITED),
        (500, TRANSIENT),
        (502, TRANSIENT),
        (503, TRANSIENT),
        (504, TRANSIENT),
        (599, TRANSIENT),
    ],
)
def test_status_classification_with_default_codes(status: int, kind: ErrorKind) -> None:
    """Default set: 408 and 5xx transient, 429 rate-limited, everything else non-2xx fatal."""
    expected = Failure(kind, "HTTPStatus", f"HTTP {status}", http_status=status)

    assert expected == classify_status(status, DEFAULT_CODES)


@pytest.mark.parametrize(
    ("status", "kind"),
    [(503, TRANSIENT), (500, FATAL), (504, FATAL), (408, FATAL), (429, RATE_LIMITED)],
)
def test_status_classification_with_custom_codes(status: int, kind: ErrorKind) -> None:
    """The transient codes are the argument; 429 is rate-limited whatever the set holds."""
    failure = classify_status(status, frozenset({503}))
    assert failure is not None
    assert kind == failure.kind


def test_429_stays_rate_limited_when_listed_as_transient() -> None:
    """Listing 429 in the transient codes does not turn it into a plain transient failure."""
    failure = classify_status(429, frozenset({429, 503}))
    assert failure is not None
    assert RATE_LIMITED == failure.kind


def test_empty_code_set_makes_5xx_fatal() -> None:
    """With no transient codes, a 503 is fatal."""
    failure = classify_status(503, frozenset())
    assert failure is not None
    assert FATAL == failure.kind


@pytest.mark.parametrize(
    ("failure", "label"),
    [
        (Failure(TRANSIENT, "HTTPStatus", "HTTP 503", 503), "HTTP 503"),
        (Failure(FATAL, "HTTPStatus", "HTTP 404", 404), "HTTP 404"),
        (Failure(TRANSIENT, "ReadTimeout", "timed out"), "ReadTimeout"),
        (Failure(FATAL, "NameNotFound", "nxdomain"), "NameNotFound"),
    ],
)
def test_failure_label(failure: Failure, label: str) -> None:
    """A label is `HTTP <status>` for answers and the type otherwise."""
    assert label == failure.label


def test_failure_equality_ignores_unexpected() -> None:
    """Two failures that differ only in the carried exception compare equal."""
    a = Failure(FATAL, "ValueError", "boom", unexpected=ValueError("boom"))
    b = Failure(FATAL, "ValueError", "boom")

    assert a == b


# ---- backoff_delay ---------------------------------------------------------------------


def mid() -> float:
    return 0.5


@pytest.mark.parametrize(
    ("attempt", "delay"),
    [(1, 30.0), (2, 60.0), (3, 120.0), (4, 240.0), (5, 300.0), (6, 300.0), (7, 300.0)],
)
def test_backoff_schedule_without_jitter(attempt: int, delay: float) -> None:
    """base 30, cap 300, no jitter: 30, 60, 120, 240, then the cap."""
    assert delay == backoff_delay(attempt, 30.0, 300.0, 0.0, mid)


@pytest.mark.parametrize("attempt", [62, 63, 64, 100, 1024, 10**6, 10**18])
def test_huge_attempt_numbers_do_not_overflow(attempt: int) -> None:
    """Attempt numbers far past the cap give the cap, not an OverflowError."""
    assert 300.0 == backoff_delay(attempt, 30.0, 300.0, 0.0, mid)


def test_huge_attempt_with_a_huge_cap_stays_finite() -> None:
    """Even an enormous cap gives a finite delay for an enormous attempt number."""
    assert 2.0**62 == backoff_delay(10**9, 1.0, 1e300, 0.0, mid)


@pytest.mark.parametrize(
    ("rand_value", "factor"),
    [(0.0, 0.8), (0.25, 0.9), (0.5, 1.0), (0.75, 1.1), (0.999999, 1.2)],
)
def test_jitter_spans_one_minus_j_to_one_plus_j(rand_value: float, factor: float) -> None:
    """rand() in [0, 1) maps linearly onto a factor in [1-j, 1+j)."""
    delay = backoff_delay(3, 30.0, 300.0, 0.2, lambda: rand_value)

    assert pytest.approx(120.0 * factor, rel=1e-5) == delay


def test_jitter_lower_bound_is_exact() -> None:
    """rand() == 0.0 gives exactly delay * (1 - jitter)."""
    assert 120.0 * (1 - 0.2) == backoff_delay(3, 30.0, 300.0, 0.2, lambda: 0.0)


def test_jitter_upper_bound_is_never_reached() -> None:
    """The largest rand() stays strictly below delay * (1 + jitter)."""
    assert backoff_delay(3, 30.0, 300.0, 0.2, lambda: 0.999999) < 120.0 * 1.2


def test_jitter_is_applied_after_the_cap() -> None:
    """The cap bounds the delay before jitter, so a jittered delay may exceed it."""
    delay = backoff_delay(10, 30.0, 300.0, 0.2, lambda: 0.999999)

    assert pytest.approx(360.0, rel=1e-5) == delay


@pytest.mark.parametrize(
    ("attempt", "delay"),
    [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (5, 1.0)],
)
def test_sub_second_base(attempt: int, delay: float) -> None:
    """Fractional bases and caps work: 0.2, 0.4, 0.8, then the 1.0 cap."""
    assert pytest.approx(delay) == backoff_delay(attempt, 0.2, 1.0, 0.0, mid)


# ---- decide ----------------------------------------------------------------------------


def rules(**changes: Any) -> RetryRules:
    return replace(RETRY, **changes)


FATAL_FAILURE = Failure(FATAL, "HTTPStatus", "HTTP 404", 404)
TRANSIENT_FAILURE = Failure(TRANSIENT, "ReadTimeout", "timed out")


@pytest.mark.parametrize("attempt", [1, 2, 4, 5])
def test_fatal_is_dead_even_with_budget_left(attempt: int) -> None:
    """A fatal failure kills the job at any attempt, budget or not."""
    expected = MarkDead(DeadReason.FATAL, FATAL_FAILURE)
    assert expected == decide(FATAL_FAILURE, attempt, 4, 0, NOW, rules())


@pytest.mark.parametrize("failure", [TRANSIENT_FAILURE])
@pytest.mark.parametrize(("attempt", "delay"), [(1, 30.0), (2, 60.0), (3, 120.0)])
def test_retryable_with_budget_left_is_rescheduled(
    failure: Failure, attempt: int, delay: float
) -> None:
    """A transient or rate-limited failure before the last attempt is retried after the delay."""
    expected = Reschedule(NOW + timedelta(seconds=delay), delay, failure)

    assert expected == decide(failure, attempt, 4, 0, NOW, rules())


@pytest.mark.parametrize("failure", [TRANSIENT_FAILURE])
@pytest.mark.parametrize("attempt", [4, 5, 100])
def test_retryable_on_the_last_attempt_is_exhausted(failure: Failure, attempt: int) -> None:
    """At (or past) max_attempts a retryable failure makes the job dead: budget spent."""
    expected = MarkDead(DeadReason.RETRIES_EXHAUSTED, failure)
    assert expected == decide(failure, attempt, 4, 0, NOW, rules())


def test_single_attempt_budget_never_retries() -> None:
    """With max_attempts 1 the first transient failure is final."""
    expected = MarkDead(DeadReason.RETRIES_EXHAUSTED, TRANSIENT_FAILURE)

    assert expected == decide(TRANSIENT_FAILURE, 1, 1, 0, NOW, rules())


def test_max_attempts_comes_from_the_argument() -> None:
    """The job's own budget counts (the rules hold none: INGEST_MAX_ATTEMPTS is a submit's
    default)."""
    expected = MarkDead(DeadReason.RETRIES_EXHAUSTED, TRANSIENT_FAILURE)

    assert expected == decide(TRANSIENT_FAILURE, 2, 2, 0, NOW, rules())


@pytest.mark.parametrize(("rand_value", "delay"), [(0.0, 24.0), (0.5, 30.0)])
def test_decide_passes_rand_to_the_jitter(rand_value: float, delay: float) -> None:
    """The retry time uses the given random source and the rules' jitter."""
    decision = decide(
        TRANSIENT_FAILURE, 1, 4, 0, NOW, rules(backoff_jitter=0.2), rand=lambda: rand_value
    )

    assert Reschedule(NOW + timedelta(seconds=delay), delay, TRANSIENT_FAILURE) == decision


def test_decide_with_sub_second_settings() -> None:
    """Sub-second backoff settings give a sub-second retry time."""
    decision = decide(
        TRANSIENT_FAILURE,
        2,
        4,
        0,
        NOW,
        rules(backoff_base_seconds=0.25, backoff_max_seconds=1.0),
        rand=mid,
    )

    assert Reschedule(NOW + timedelta(seconds=0.5), 0.5, TRANSIENT_FAILURE) == decision


def test_an_attempt_that_could_not_be_settled_is_dead_and_fatal() -> None:
    """An exception raised while deciding kills the job (fatal, the exception's name and
    message, kept for its trace) and says nothing of its domain."""
    lease = Lease("j", "http://a.test/", "a.test", "t", 1, 4, 0, "w", "l", NOW)
    exc = ValueError("could not convert string to float: '²'")
    outcome = unsettled(lease, exc, 12)
    failure = Failure(FATAL, "ValueError", "could not convert string to float: '²'")
    assert isinstance(outcome, Died)
    assert (
        (DeadReason.FATAL, failure, True),
        AttemptOutcome.FATAL,
        12,
        DomainSignal.SILENT,
    ) == (
        (outcome.reason, outcome.failure, outcome.spends_attempt),
        outcome.ended,
        outcome.duration_ms,
        outcome.domain,
    )
    assert exc is outcome.failure.unexpected


# ---- refreshes ------------------------------------------------------------------------------

PREVIOUS = Previous(2, '"e"', "Tue, 01 Dec 2026 08:00:00 GMT", "body-hash", "text-hash")


def fetched(text_sha256: str) -> Fetched:
    return Fetched(
        200,
        "http://a.test/",
        "text/html",
        10,
        "other-body",
        "T",
        4,
        b"",
        "text",
        None,
        etag='"f"',
        last_modified=None,
        text_sha256=text_sha256,
    )


def refresh_lease(previous: Previous | None, refresh_every: int | None = None) -> Lease:
    return Lease(
        "j",
        "http://a.test/",
        "a.test",
        "t",
        1,
        4,
        0,
        "w",
        "l",
        NOW,
        previous=previous,
        refresh_every=refresh_every,
    )


@pytest.mark.parametrize(
    ("previous", "text_sha256", "changed"),
    [(None, "text-hash", False), (PREVIOUS, "new-hash", True)],
    ids=["first fetch", "text changed"],
)
def test_a_new_text_completes_the_job(previous, text_sha256, changed) -> None:
    """A first success, or a refresh whose text hashes differently, stores a version;
    only the refresh is a change (`job.changed`)."""
    result = fetched(text_sha256)
    outcome = settle(refresh_lease(previous), result, 5, NOW, rules())
    assert isinstance(outcome, Succeeded)
    assert (
        (result, None, changed),
        AttemptOutcome.SUCCEEDED,
        DomainSignal.ANSWERED,
    ) == ((outcome.fetched, outcome.refresh_at, outcome.changed), outcome.ended, outcome.domain)


def test_a_refresh_whose_text_hashes_the_same_is_unchanged() -> None:
    """Another body, the same text: confirmed (no version), with the answer's validators
    and its body's size and hash."""
    outcome = settle(refresh_lease(PREVIOUS), fetched("text-hash"), 5, NOW, rules())
    unmodified = Unmodified(AttemptOutcome.UNCHANGED, 200, '"f"', None, 10, "other-body")
    assert isinstance(outcome, Confirmed)
    assert ((unmodified, None), AttemptOutcome.UNCHANGED) == (
        (outcome.unmodified, outcome.refresh_at),
        outcome.ended,
    )


def test_a_304_confirms_the_content() -> None:
    unmodified = Unmodified(AttemptOutcome.NOT_MODIFIED, 304, None, None)
    outcome = settle(refresh_lease(PREVIOUS, 60), unmodified, 5, NOW, rules())
    assert isinstance(outcome, Confirmed)
    assert ((unmodified, NOW + timedelta(seconds=60)), AttemptOutcome.NOT_MODIFIED) == (
        (outcome.unmodified, outcome.refresh_at),
        outcome.ended,
    )


@pytest.mark.parametrize("refresh_every", [None, 60, 86_400])
def test_a_success_schedules_the_next_refresh(refresh_every) -> None:
    """`refresh_every` seconds after the success; never without one."""
    outcome = settle(refresh_lease(None, refresh_every), fetched("h"), 5, NOW, rules())
    expected = None if refresh_every is None else NOW + timedelta(seconds=refresh_every)
    assert isinstance(outcome, Succeeded | Confirmed)
    assert expected == outcome.refresh_at


@pytest.mark.parametrize("status", [404, 410])
def test_a_refresh_answered_404_or_410_is_gone(status) -> None:
    """Gone at once (no retry), only for a page fetched before: a first fetch's 404 is fatal."""
    failure = classify_status(status, frozenset({500}))
    assert failure is not None
    refresh = decide(failure, 1, 4, 0, NOW, rules(), refresh=True)
    first = decide(failure, 1, 4, 0, NOW, rules())
    assert isinstance(refresh, MarkDead) and isinstance(first, MarkDead)
    assert (DeadReason.GONE, DeadReason.FATAL) == (refresh.reason, first.reason)


def test_a_refresh_failing_transiently_is_retried_as_any_fetch() -> None:
    failure = Failure(TRANSIENT, "HTTPStatus", "HTTP 503", 503)
    assert isinstance(decide(failure, 1, 4, 0, NOW, rules(), refresh=True), Reschedule)


def _pause_rules() -> RetryRules:
    return rules(backoff_base_seconds=10, backoff_max_seconds=100)


def _http(status: int, kind: ErrorKind, retry_after: str | None = None) -> Failure:
    return Failure(kind, "HTTPStatus", f"HTTP {status}", status, retry_after)


_TIMEOUT = Failure(ErrorKind.TRANSIENT, "ConnectTimeout", "timed out")


@pytest.mark.parametrize(
    ("failure", "consecutive", "pause"),
    [
        (
            _http(429, ErrorKind.RATE_LIMITED, "120"),
            1,
            DomainPause(NOW + timedelta(seconds=120), "HTTP 429, Retry-After 120s"),
        ),
        (
            _http(429, ErrorKind.RATE_LIMITED),
            1,
            DomainPause(NOW + timedelta(seconds=10), "HTTP 429, backoff 10s"),
        ),
        (
            _http(503, ErrorKind.RATE_LIMITED, "30"),
            1,
            DomainPause(NOW + timedelta(seconds=30), "HTTP 503, Retry-After 30s"),
        ),
        (
            _http(503, ErrorKind.TRANSIENT),
            2,
            DomainPause(NOW + timedelta(seconds=20), "HTTP 503, backoff 20s"),
        ),
        (_TIMEOUT, 2, None),
        (
            _TIMEOUT,
            3,
            DomainPause(NOW + timedelta(seconds=40), "ConnectTimeout, backoff 40s"),
        ),
        (_http(500, ErrorKind.TRANSIENT), 1, None),
        (
            _http(500, ErrorKind.TRANSIENT),
            4,
            DomainPause(NOW + timedelta(seconds=80), "HTTP 500, backoff 80s"),
        ),
        (_http(404, ErrorKind.FATAL), 9, None),
        (Failure(ErrorKind.FATAL, "NameNotFound", "nx"), 9, None),
    ],
)
def test_domain_pause(failure, consecutive, pause):
    """429/503 pause at once (Retry-After, else backoff); other transients at the threshold;
    fatal answers such as a 404 never."""
    assert pause == domain_pause(failure, consecutive, NOW, _pause_rules(), rand=lambda: 0.5)


# ---- transitions: each outcome's maker names it once ------------------------------------------


def _lease_at(attempt: int, previous: Previous | None = None) -> Lease:
    return Lease(
        "j", "http://a.test/", "a.test", "t", attempt, 3, 0, "w", "l", NOW, previous=previous
    )


def _answer(status: int, kind: ErrorKind) -> Failure:
    return Failure(kind, "HTTPStatus", f"HTTP {status}", status)


@pytest.mark.parametrize(
    ("make", "transition"),
    [
        (lambda: settle(_lease_at(1), fetched("h"), 5, NOW, rules()), Succeeded),
        (
            lambda: settle(_lease_at(1, PREVIOUS), fetched("text-hash"), 5, NOW, rules()),
            Confirmed,
        ),
        (
            lambda: settle(_lease_at(1), _answer(500, TRANSIENT), 5, NOW, rules()),
            Retried,
        ),
        (
            lambda: settle(_lease_at(1), _answer(429, RATE_LIMITED), 5, NOW, rules()),
            Deferred,
        ),
        (
            lambda: settle(_lease_at(3), _answer(500, TRANSIENT), 5, NOW, rules()),
            Died,
        ),
        (
            lambda: settle(_lease_at(1), _answer(404, FATAL), 5, NOW, rules()),
            Died,
        ),
        (lambda: unsettled(_lease_at(1), ValueError("x"), 5), Died),
        (lambda: expired(_lease_at(1), NOW), Expired),
        (lambda: expired(_lease_at(3), NOW), Expired),
        (lambda: handed_back(_lease_at(1), NOW), HandedBack),
        (lambda: yielded(_lease_at(1), NOW), HandedBack),
    ],
    ids=[
        "success",
        "unchanged",
        "5xx",
        "429",
        "5xx, budget spent",
        "404",
        "unsettled",
        "lease expired",
        "lease expired, budget spent",
        "shutdown",
        "yielded to a priority",
    ],
)
def test_each_outcome_names_its_transition(make, transition) -> None:
    outcome = make()
    assert transition is type(outcome)
    carries_failure = getattr(outcome, "failure", None) is not None
    assert carries_failure == (transition in (Retried, Deferred, Died, Expired))
