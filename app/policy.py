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
    └── anything else: a bug or a case to classify                 fatal, logged with its trace

HTTP answers: 2xx succeed; 429 is rate_limited; codes in `transient_status_codes`
(default 408 and 5xx) are transient; everything else is fatal.

The transient set is `Settings.transient_errors` (names) and `transient_status_codes`.
"""

import random
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from app.settings import Settings
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
    unexpected: BaseException | None = field(default=None, compare=False, repr=False)
    """Set to the exception when it is not a known case, so its trace can be logged."""

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
    known = {
        "TooManyRedirects",
        "InvalidURL",
        "UnsupportedProtocol",
        "LocalProtocolError",
        "CloseError",
        "ProxyError",
    }
    return Failure(ErrorKind.FATAL, name, message, unexpected=None if name in known else exc)


def classify_status(status: int, transient_status_codes: frozenset[int]) -> Failure | None:
    """Classify an HTTP answer; None means success."""
    if 200 <= status < 300:
        return None
    message = f"HTTP {status}"
    if status == 429:
        return Failure(ErrorKind.RATE_LIMITED, "HTTPStatus", message, status)
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


def decide(
    failure: Failure,
    attempt: int,
    max_attempts: int,
    now: datetime,
    settings: Settings,
    rand: Callable[[], float] = random.random,
) -> Decision:
    """What happens to a job whose attempt number `attempt` failed with `failure`."""
    if failure.kind is ErrorKind.FATAL:
        return MarkDead(DeadReason.FATAL)
    if attempt >= max_attempts:
        return MarkDead(DeadReason.RETRIES_EXHAUSTED)
    delay = backoff_delay(
        attempt,
        settings.backoff_base_seconds,
        settings.backoff_max_seconds,
        settings.backoff_jitter,
        rand,
    )
    return Reschedule(now + timedelta(seconds=delay), delay)
