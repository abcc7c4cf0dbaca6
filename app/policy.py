"""Retry policy: pure functions that classify a failure and decide a job's next state.

No I/O, no clock reads, no randomness of their own: time and the random source are
arguments, so every branch is tested with tables of cases.

Which failures are which (exception names are httpx's unless noted)::

    Exception
    ├── httpx.TransportError
    │   ├── TimeoutException: ConnectTimeout, ReadTimeout, WriteTimeout, PoolTimeout  transient
    │   ├── NetworkError
    │   │   ├── ConnectError
    │   │   │   ├── caused by gaierror EAI_NONAME / EAI_NODATA (NXDOMAIN)         fatal
    │   │   │   ├── caused by ssl.SSLCertVerificationError                       fatal
    │   │   │   └── anything else (refused, reset, EAI_AGAIN)                     transient
    │   │   ├── ReadError, WriteError                                            transient
    │   │   └── CloseError                                                       fatal
    │   ├── ProtocolError
    │   │   ├── RemoteProtocolError (server dropped the connection)              transient
    │   │   └── LocalProtocolError                                               fatal
    │   ├── UnsupportedProtocol                                                  fatal
    │   └── ProxyError                                                           fatal
    ├── httpx.TooManyRedirects, httpx.InvalidURL                                 fatal
    ├── app.fetcher.FetchTimeout (total deadline passed)                         transient
    ├── app.fetcher's own refusals (BlockedDestination, BodyTooLarge, ...)       fatal
    └── anything else: a bug or a case to classify                 fatal, logged with its trace

HTTP answers: 2xx succeed; 429, and 503 with a Retry-After header, are rate_limited; codes
in `transient_status_codes` (default 408 and 5xx) are transient; everything else is fatal.

A rate-limited answer does not spend the attempt budget: the job is deferred to
max(backoff, Retry-After) and its `deferrals` count grows, up to `max_deferrals`.

The transient set is `Settings.transient_errors` (names) and `transient_status_codes`.
"""

import random
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from app.settings import DEFAULT_TRANSIENT_ERRORS, Settings
from app.states import DeadReason, ErrorKind

# gaierror codes that mean the name does not exist, as opposed to a resolver hiccup.
_NAME_NOT_FOUND = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


@dataclass(frozen=True)
class Failure:
    """Why an attempt failed, as stored in `last_error` and the attempt's history."""

    kind: ErrorKind
    type: str
    message: str
    http_status: int | None = None
    retry_after: str | None = None
    """The answer's Retry-After header, as sent; `parse_retry_after` reads it."""
    unexpected: BaseException | None = field(default=None, compare=False, repr=False)
    """Set to the exception when it is not a known case, so its trace can be logged."""

    @property
    def spends_attempt(self) -> bool:
        """A rate-limited answer is the server's schedule, not the job's failure: it is a
        deferral, which gives the attempt back (whether the job is rescheduled or dies)."""
        return self.kind is not ErrorKind.RATE_LIMITED

    @property
    def label(self) -> str:
        """What a log line calls it: `HTTP 503` or `ReadTimeout`."""
        return f"HTTP {self.http_status}" if self.http_status else self.type


@dataclass(frozen=True)
class Reschedule:
    retry_at: datetime
    delay_seconds: float


@dataclass(frozen=True)
class MarkDead:
    reason: DeadReason


Decision = Reschedule | MarkDead


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def classify_exception(exc: BaseException, transient_errors: tuple[str, ...]) -> Failure:
    """Classify an exception raised by a fetch. Errnos are read from the cause chain."""
    name = type(exc).__name__
    message = str(exc) or name
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror) and cause.errno in _NAME_NOT_FOUND:
            return Failure(ErrorKind.FATAL, "NameNotFound", message)
        if isinstance(cause, ssl.SSLCertVerificationError):
            return Failure(ErrorKind.FATAL, "CertificateError", message)
    if name in transient_errors:
        return Failure(ErrorKind.TRANSIENT, name, message)
    known = name in _KNOWN_FATAL or name in DEFAULT_TRANSIENT_ERRORS
    return Failure(ErrorKind.FATAL, name, message, unexpected=None if known else exc)


_KNOWN_FATAL = frozenset(
    {
        "TooManyRedirects",
        "InvalidURL",
        "UnsupportedProtocol",
        "LocalProtocolError",
        "CloseError",
        "ProxyError",
    }
)


def classify_status(
    status: int, transient_status_codes: frozenset[int], retry_after: str | None = None
) -> Failure | None:
    """Classify an HTTP answer; None means success. `retry_after` is its Retry-After header."""
    if 200 <= status < 300:
        return None
    message = f"HTTP {status}"
    if status == 429 or (status == 503 and retry_after is not None):
        return Failure(ErrorKind.RATE_LIMITED, "HTTPStatus", message, status, retry_after)
    if status in transient_status_codes:
        return Failure(ErrorKind.TRANSIENT, "HTTPStatus", message, status)
    return Failure(ErrorKind.FATAL, "HTTPStatus", message, status)


def backoff_delay(
    attempt: int, base: float, cap: float, jitter: float, rand: Callable[[], float]
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based).

    delay = min(base * 2^(attempt-1), cap) * uniform(1 - jitter, 1 + jitter)

    README's "Retries" section quotes this formula: keep the two in sync.
    `rand()` returns a float in [0, 1).
    """
    exponent = min(attempt - 1, 62)  # 2**62 * base overflows nothing and is past any cap
    delay = min(base * 2.0**exponent, cap)
    return delay * (1 - jitter + 2 * jitter * rand())


def parse_retry_after(value: str | None, now: datetime, cap: float) -> float | None:
    """Seconds a Retry-After header asks us to wait, capped at `cap`; None if absent or bad.

    Both forms of RFC 9110: delta-seconds (`120`) and an HTTP-date. Negative, past or
    unparseable values are ignored.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        seconds = float(value)
    else:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # "-0000" means UTC without saying so
            return None
        seconds = (when - now).total_seconds()
        if seconds < 0:
            return None
    return min(seconds, cap)


def decide(
    failure: Failure,
    attempt: int,
    max_attempts: int,
    deferrals: int,
    now: datetime,
    settings: Settings,
    rand: Callable[[], float] = random.random,
) -> Decision:
    """What happens to a job whose attempt number `attempt` failed with `failure`.

    `deferrals` is how many rate-limited answers the job had before this one.
    """
    if failure.kind is ErrorKind.FATAL:
        return MarkDead(DeadReason.FATAL)
    if failure.kind is ErrorKind.RATE_LIMITED:
        if deferrals >= settings.max_deferrals:
            return MarkDead(DeadReason.RATE_LIMITED)
        backoff = _backoff(deferrals + 1, settings, rand)
        asked = parse_retry_after(failure.retry_after, now, settings.retry_after_max_seconds)
        delay = max(backoff, asked or 0.0)
        return Reschedule(now + timedelta(seconds=delay), delay)
    if attempt >= max_attempts:
        return MarkDead(DeadReason.RETRIES_EXHAUSTED)
    delay = _backoff(attempt, settings, rand)
    return Reschedule(now + timedelta(seconds=delay), delay)


def _backoff(attempt: int, settings: Settings, rand: Callable[[], float]) -> float:
    return backoff_delay(
        attempt,
        settings.backoff_base_seconds,
        settings.backoff_max_seconds,
        settings.backoff_jitter,
        rand,
    )
