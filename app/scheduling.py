"""Domain and tenant rules: pure functions, no I/O, time and randomness as arguments.

- `domain_pause`: after a failed attempt, until when the whole domain waits.
- `choose`: which of the claim's candidate jobs to take, honouring priority, fair share
  across tenants, and each domain's politeness limits.
"""

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.policy import Failure, backoff_delay, parse_retry_after
from app.settings import Settings
from app.states import ErrorKind

# Answers that mean "the server as a whole is struggling": they pause the domain at once.
PAUSE_AT_ONCE_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class DomainPause:
    until: datetime
    reason: str


def counts_against_domain(failure: Failure) -> bool:
    """Transient failures are the server's (5xx, timeouts, refused connections), not the job's."""
    return failure.kind in (ErrorKind.TRANSIENT, ErrorKind.RATE_LIMITED)


def domain_pause(
    failure: Failure,
    consecutive_failures: int,
    now: datetime,
    settings: Settings,
    rand: Callable[[], float] = random.random,
) -> DomainPause | None:
    """Until when a failure pauses its domain, or None.

    `consecutive_failures` counts this failure. A 429 or 503 pauses at once; other transient
    failures once `domain_failure_threshold` of them follow each other. The pause lasts what
    Retry-After asks, else the backoff for the consecutive count. Fatal failures (a 404)
    never pause a domain.
    """
    if not counts_against_domain(failure):
        return None
    at_once = failure.http_status in PAUSE_AT_ONCE_STATUSES
    if not at_once and consecutive_failures < settings.domain_failure_threshold:
        return None
    asked = parse_retry_after(failure.retry_after, now, settings.retry_after_max_seconds)
    if asked is not None:
        delay, why = asked, f"{failure.label}, Retry-After {asked:g}s"
    else:
        delay = backoff_delay(
            consecutive_failures,
            settings.backoff_base_seconds,
            settings.backoff_max_seconds,
            settings.backoff_jitter,
            rand,
        )
        why = f"{failure.label}, {consecutive_failures} consecutive failures"
    return DomainPause(now + timedelta(seconds=delay), why)


@dataclass(frozen=True)
class Candidate:
    """A due job the claim may take."""

    id: str
    tenant: str
    domain: str
    priority: int
    created_at: datetime
    due_since: datetime | None = None
    """When it became claimable (for the queue-lag metric); not used to choose."""


@dataclass(frozen=True)
class DomainState:
    in_flight: int
    next_start_at: datetime | None = None
    paused_until: datetime | None = None


def choose(
    candidates: Sequence[Candidate],
    tenants_last_served: dict[str, datetime | None],
    domains: dict[str, DomainState],
    limit: int,
    now: datetime,
    settings: Settings,
) -> list[Candidate]:
    """Pick up to `limit` candidates in claim order.

    Order: higher priority first; then the tenant served least recently (a tenant served in
    this very claim goes to the back, so tenants take turns); then the oldest job. A job is
    skipped while its domain is paused, has `domain_max_in_flight` fetches running, or
    started a fetch less than `domain_min_interval_seconds` ago (so at most one start per
    domain per claim when an interval is set).
    """
    served: dict[str, tuple[int, datetime]] = {
        tenant: (0, last or datetime.min.replace(tzinfo=now.tzinfo))
        for tenant, last in tenants_last_served.items()
    }
    state = dict(domains)
    remaining = list(candidates)
    chosen: list[Candidate] = []
    turn = 0
    while remaining and len(chosen) < limit:
        open_ = [c for c in remaining if _may_start(state.get(c.domain), now, settings)]
        if not open_:
            break
        pick = min(
            open_,
            key=lambda c: (-c.priority, served.get(c.tenant, (0, now)), c.created_at, c.id),
        )
        chosen.append(pick)
        remaining.remove(pick)
        turn += 1
        served[pick.tenant] = (turn, now)
        domain = state.get(pick.domain, DomainState(0))
        interval = settings.domain_min_interval_seconds
        state[pick.domain] = replace(
            domain,
            in_flight=domain.in_flight + 1,
            next_start_at=now + timedelta(seconds=interval) if interval else None,
        )
    return chosen


def _may_start(domain: DomainState | None, now: datetime, settings: Settings) -> bool:
    if domain is None:
        return True
    if domain.paused_until is not None and domain.paused_until > now:
        return False
    if domain.next_start_at is not None and domain.next_start_at > now:
        return False
    return domain.in_flight < settings.domain_max_in_flight
