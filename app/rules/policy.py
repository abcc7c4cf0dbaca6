"""Retry policy: pure functions that classify a failure and decide a job's next state.

No I/O, no clock reads, no randomness of their own: time and the random source are
arguments, so every branch is tested with tables of cases. Every decision of the retry
contract is here (classify, back off, defer, settle, pause a domain, retry a delivery),
each a short function of the same `RetryRules`.

Which exceptions are transient, rate-limited or fatal: the tree in `classify_exception`;
which HTTP answers: `classify_status`; the transient set is `Settings.transient_errors`
(names) and `transient_status_codes`. A rate-limited answer does not spend the attempt
budget: the job is deferred to max(backoff, Retry-After) and its `deferrals` count grows,
up to `max_deferrals`. What a refresh's success is, and the storage quota: `settle`.
"""

import random
import socket
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

from app.model import (
    ROBOTS_DISALLOWED,
    AttemptOutcome,
    Confirmed,
    DeadReason,
    Deferral,
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
    NotKept,
    Outcome,
    Reschedule,
    Retried,
    Succeeded,
    Unmodified,
)
from app.settings import DEFAULT_TRANSIENT_ERRORS
from app.text.wording import seconds


@dataclass(frozen=True, slots=True)
class RetryRules:
    """The numbers policy decides with, built once from the settings by the composition root
    (`app.runtime`): the backoff formula's (`backoff_delay`), the rate limits' caps, and how
    many failures in a row pause a domain."""

    backoff_base_seconds: float
    backoff_max_seconds: float
    backoff_jitter: float
    max_deferrals: int
    """Rate-limited answers a job may get before it is dead (rate_limited)."""
    retry_after_max_seconds: float
    """Longest Retry-After honoured."""
    domain_failure_threshold: int
    """Consecutive transient failures that pause a domain (`domain_pause`)."""


# gaierror codes that mean the name does not exist, as opposed to a resolver hiccup.
_NAME_NOT_FOUND = frozenset(
    code for code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)) if code is not None
)


def _causes(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def classify_exception(exc: BaseException, transient_errors: tuple[str, ...]) -> Failure:
    """Classify an exception raised by a fetch. Errnos are read from the cause chain.

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
        ├── app.fetch.fetcher.FetchTimeout (total deadline passed)                   transient
        ├── app.fetch.fetcher's refusals (BlockedDestination, BodyTooLarge,
        │   InvalidRedirect, ...)                                                    fatal
        └── anything else: a bug or a case to classify                 fatal, logged with its trace

    An exception raised while deciding (by `settle` itself, say) takes the last branch too
    (`unsettled`): the job dies, fatal, rather than stay `running` until its lease runs out.
    """
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
    """Classify an HTTP answer; None means success. `retry_after` is its Retry-After header.

    2xx succeed; 429, and 503 with a Retry-After header, are rate_limited; codes in
    `transient_status_codes` (default 408 and 5xx) are transient; everything else is fatal.
    A refresh (a job that succeeded before) answered 404 or 410 dies `gone`, not `fatal`: the
    page went, and its last content is kept. A URL its robots.txt disallows dies `robots`
    (`app.rules.robots`, with INGEST_ROBOTS_TXT=obey); a robots.txt that cannot be read now is a
    transient failure, or a rate-limited one on a 429.
    """
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

    Both forms of RFC 9110: delta-seconds (`120`, ASCII digits only) and an HTTP-date.
    Negative, past or unparseable values are ignored.
    """
    if value is None:
        return None
    value = value.strip()
    # ASCII: `isdigit` alone admits "²" (which `float` refuses) and "١٢".
    if value.isascii() and value.isdigit():
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


GONE_STATUSES = frozenset({404, 410})
"""A refresh answered one of these finds its page gone (`DeadReason.GONE`)."""


def decide(
    failure: Failure,
    attempt: int,
    max_attempts: int,
    deferrals: int,
    now: datetime,
    rules: RetryRules,
    rand: Callable[[], float] = random.random,
    refresh: bool = False,
) -> Reschedule | MarkDead:
    """What happens to a job whose attempt number `attempt` failed with `failure`.

    `deferrals` is how many rate-limited answers the job had before this one; `refresh`
    says the job succeeded before.
    """
    if refresh and failure.http_status in GONE_STATUSES:
        return MarkDead(DeadReason.GONE, failure)
    if failure.type == ROBOTS_DISALLOWED:
        return MarkDead(DeadReason.ROBOTS, failure)
    if failure.kind is ErrorKind.FATAL:
        return MarkDead(DeadReason.FATAL, failure)
    if failure.kind is ErrorKind.RATE_LIMITED:
        if deferrals >= rules.max_deferrals:
            return MarkDead(DeadReason.RATE_LIMITED, failure, spends_attempt=False)
        backoff = _backoff(deferrals + 1, rules, rand)
        asked = parse_retry_after(failure.retry_after, now, rules.retry_after_max_seconds)
        delay = max(backoff, asked or 0.0)
        deferral = Deferral(deferrals + 1, rules.max_deferrals)
        return Reschedule(
            now + timedelta(seconds=delay), delay, failure, spends_attempt=False, deferral=deferral
        )
    if attempt >= max_attempts:
        return MarkDead(DeadReason.RETRIES_EXHAUSTED, failure)
    delay = _backoff(attempt, rules, rand)
    return Reschedule(now + timedelta(seconds=delay), delay, failure)


def settle(
    lease: Lease,
    result: Fetched | Unmodified | Failure,
    duration_ms: int,
    now: datetime,
    rules: RetryRules,
    rand: Callable[[], float] = random.random,
) -> Outcome:
    """The outcome to record for a finished fetch: its transition, and what it says of the
    domain.

    A refresh that succeeds is one of three: a 304, or the very body stored (`Unmodified`),
    confirms the content; a 200 whose main text hashes as the stored one's confirms it too
    (only a rotating ad or a timestamp moved); any other text is a change, a new version. A
    new version that would take its tenant's bytes kept past INGEST_TENANT_MAX_STORAGE_BYTES
    is not kept (`within_storage_quota`, which the completer asks before it records): a
    refresh's change ends `not_kept`, a first fetch dead.
    """
    previous = lease.previous
    if isinstance(result, Failure):
        settled = decide(
            result,
            lease.attempt,
            lease.max_attempts,
            lease.deferrals,
            now,
            rules,
            rand,
            refresh=previous is not None,
        )
        return failed(lease, settled, duration_ms, domain_signal(result))
    refresh_at = next_refresh(lease.refresh_every, now)
    answered = DomainSignal.ANSWERED
    if isinstance(result, Fetched) and (
        previous is None or previous.text_sha256 != result.text_sha256
    ):
        changed = previous is not None
        return Succeeded(lease, duration_ms, result, refresh_at, changed, domain=answered)
    if isinstance(result, Fetched):
        result = Unmodified(
            AttemptOutcome.UNCHANGED,
            result.http_status,
            result.etag,
            result.last_modified,
            result.bytes,
            result.sha256,
        )
    return Confirmed(lease, duration_ms, result, refresh_at, domain=answered)


def failed(
    lease: Lease,
    decision: Reschedule | MarkDead,
    duration_ms: int,
    domain: DomainSignal = DomainSignal.SILENT,
) -> Retried | Deferred | Died:
    """The outcome of a failed attempt as `decide` settled it: a deferral is a rescheduling
    that gave the attempt back."""
    if isinstance(decision, MarkDead):
        reason, failure = decision.reason, decision.failure
        return Died(lease, duration_ms, reason, failure, decision.spends_attempt, domain=domain)
    at, delay, failure = decision.retry_at, decision.delay_seconds, decision.failure
    if decision.deferral is None:
        return Retried(lease, duration_ms, failure, at, delay, domain=domain)
    return Deferred(lease, duration_ms, failure, at, delay, decision.deferral, domain=domain)


def next_refresh(refresh_every: int | None, now: datetime) -> datetime | None:
    """When a job that succeeded at `now` is due to be fetched again; None: never."""
    return None if refresh_every is None else now + timedelta(seconds=refresh_every)


def unexpected(exc: Exception) -> Failure:
    """A failure no rule classifies, because deciding raised `exc` (a bug, or a case to
    classify): fatal, so the job or delivery ends instead of staying claimed, with the
    exception kept for its trace."""
    name = type(exc).__name__
    return Failure(ErrorKind.FATAL, name, str(exc) or name, unexpected=exc)


def unsettled(lease: Lease, exc: Exception, duration_ms: int) -> Outcome:
    """The outcome of an attempt whose outcome could not be decided (`settle` or the fetch
    raised `exc`): the job is dead, fatal (`unexpected`); nothing is said of its domain."""
    return Died(lease, duration_ms, DeadReason.FATAL, unexpected(exc))


LEASE_EXPIRED = "lease expired: the worker stopped heartbeating"


def expired(lease: Lease, now: datetime) -> Outcome:
    """A lease that ran out (its worker died or hung): the lost attempt counts, and the job is
    due again now, or dead (`lease_expired`) with no budget left."""
    failure = Failure(ErrorKind.TRANSIENT, "LeaseExpired", LEASE_EXPIRED)
    duration_ms = int((now - lease.claimed_at).total_seconds() * 1000)
    return Expired(lease, duration_ms, failure, dead=lease.attempt >= lease.max_attempts)


def handed_back(lease: Lease, now: datetime) -> Outcome:
    """Graceful shutdown: the job is due again now, its attempt given back."""
    duration_ms = int((now - lease.claimed_at).total_seconds() * 1000)
    return HandedBack(lease, duration_ms, "worker shutting down")


def yielded(lease: Lease, now: datetime) -> Outcome:
    """A queued job handed back before its fetch began, for a higher-priority job submitted
    since: due again now, its attempt given back."""
    duration_ms = int((now - lease.claimed_at).total_seconds() * 1000)
    return HandedBack(lease, duration_ms, "a job of a higher priority was submitted")


STORAGE_QUOTA = "StorageQuota"
"""The `Failure.type` of a first fetch its tenant's storage quota did not let it keep."""


def within_storage_quota(
    outcomes: Sequence[Outcome], kept: Mapping[str, int], quota: int
) -> list[Outcome]:
    """The outcomes to record when each tenant may keep `quota` bytes of content and keeps
    `kept` (none named: 0) before these: a new version that would take its tenant past the
    quota is not kept. A refresh's change is then `not_kept` (succeeded, the last version
    and its validators kept, so the next refresh fetches the page whole again); a first
    fetch is dead (`storage_quota`), as it has nothing to show. The versions kept count in
    turn, so a batch never passes the quota by its own versions; what deleting a job's
    oldest version would free is not counted. `version_bytes` says what a version adds."""
    kept = dict(kept)
    settled: list[Outcome] = []
    for outcome in outcomes:
        if isinstance(outcome, Succeeded):
            tenant = outcome.lease.tenant
            already, adding = kept.get(tenant, 0), version_bytes(outcome.fetched)
            if already + adding > quota:
                outcome = _not_kept(outcome, already, adding, quota)
            else:
                kept[tenant] = already + adding
        settled.append(outcome)
    return settled


def version_bytes(fetched: Fetched) -> int:
    """What storing `fetched` adds to its tenant's bytes kept: its body's bytes, its text's
    and its Markdown's as UTF-8, the Markdown none when it is the text (kept once). The same
    as the triggers count of what is stored (`app.store.counts`)."""
    markdown = 0 if fetched.markdown in (None, fetched.text) else _utf8(fetched.markdown)
    return len(fetched.body) + _utf8(fetched.text) + markdown


def _utf8(text: str | None) -> int:
    if text is None:
        return 0
    # isascii() reads a flag of the string: most pages' texts are counted without a copy.
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _not_kept(outcome: Succeeded, kept: int, adding: int, quota: int) -> NotKept | Died:
    """`outcome`, its version refused by its tenant's storage quota (`within_storage_quota`)."""
    lease, duration_ms, domain = outcome.lease, outcome.duration_ms, outcome.domain
    reason = (
        f"tenant {lease.tenant!r} keeps {kept:,} bytes; this version's {adding:,} more would "
        f"pass its quota of {quota:,} (INGEST_TENANT_MAX_STORAGE_BYTES)"
    )
    previous = lease.previous
    if previous is None:
        failure = Failure(ErrorKind.FATAL, STORAGE_QUOTA, reason)
        return Died(lease, duration_ms, DeadReason.STORAGE_QUOTA, failure, domain=domain)
    return NotKept(
        lease,
        duration_ms,
        outcome.fetched.http_status,
        previous.etag,
        previous.last_modified,
        outcome.refresh_at,
        f"changed, not kept: {reason}",
        domain=domain,
    )


def _backoff(attempt: int, rules: RetryRules, rand: Callable[[], float]) -> float:
    return backoff_delay(
        attempt,
        rules.backoff_base_seconds,
        rules.backoff_max_seconds,
        rules.backoff_jitter,
        rand,
    )


# ---- domains ------------------------------------------------------------------------------

# Answers that mean "the server as a whole is struggling": they pause the domain at once.
PAUSE_AT_ONCE_STATUSES = frozenset({429, 503})


def domain_signal(failure: Failure) -> DomainSignal:
    """Transient and rate-limited failures are the server's (5xx, timeouts, refused
    connections, 429), not the job's; any other answer shows the server is up."""
    if failure.kind in (ErrorKind.TRANSIENT, ErrorKind.RATE_LIMITED):
        return DomainSignal.FAILING
    if failure.http_status is not None:
        return DomainSignal.ANSWERED
    return DomainSignal.SILENT


def domain_pause(
    failure: Failure,
    consecutive_failures: int,
    now: datetime,
    rules: RetryRules,
    rand: Callable[[], float] = random.random,
) -> DomainPause | None:
    """Until when a failure pauses its domain, or None.

    `consecutive_failures` counts this failure. A 429 or 503 pauses at once; other transient
    failures once `domain_failure_threshold` of them follow each other. The pause lasts what
    Retry-After asks, else the backoff for the consecutive count. Fatal failures (a 404)
    never pause a domain.

    The reason says what paused the domain and what set the length ("HTTP 500, backoff
    30s"), not the count: the domain's `consecutive_failures` moves on while the pause
    stands (a later success resets it), and a count frozen in the reason would contradict
    it in `GET /domains`.
    """
    if domain_signal(failure) is not DomainSignal.FAILING:
        return None
    at_once = failure.http_status in PAUSE_AT_ONCE_STATUSES
    if not at_once and consecutive_failures < rules.domain_failure_threshold:
        return None
    asked = parse_retry_after(failure.retry_after, now, rules.retry_after_max_seconds)
    if asked is not None:
        delay, why = asked, f"{failure.label}, Retry-After {asked:g}s"
    else:
        delay = _backoff(consecutive_failures, rules, rand)
        why = f"{failure.label}, backoff {seconds(delay)}"
    return DomainPause(now + timedelta(seconds=delay), why)


# ---- webhook deliveries -------------------------------------------------------------------


def delivery_retry_at(
    failure: Failure,
    attempt: int,
    max_attempts: int,
    now: datetime,
    rules: RetryRules,
    rand: Callable[[], float] = random.random,
) -> datetime | None:
    """When to POST a callback again: never after a fatal failure or the last attempt; else
    after the backoff (or the receiver's Retry-After, if longer)."""
    if failure.kind is ErrorKind.FATAL or attempt >= max_attempts:
        return None
    delay = _backoff(attempt, rules, rand)
    asked = parse_retry_after(failure.retry_after, now, rules.retry_after_max_seconds)
    return now + timedelta(seconds=max(delay, asked or 0.0))
