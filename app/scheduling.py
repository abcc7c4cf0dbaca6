"""The claim's picking rule: a pure function, no I/O, time as an argument.

`choose` takes which of the claim's candidate jobs to claim, honouring priority, fair share
across tenants, and each domain's politeness limits. The store's claim (`app.store.claim`)
finds the candidates and locks the domains; this module decides among them. `waiting_for`
says which of the same rules holds a pending job back, for operators.
"""

import heapq
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.model import Blocked, BlockReason
from app.settings import Settings


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
    pause_reason: str | None = None
    """Said by `waiting_for`; not used to choose."""
    crawl_delay: float | None = None
    """The Crawl-delay its robots.txt asked when a worker last read it (`min_interval`)."""


def min_interval(crawl_delay: float | None, settings: Settings) -> float:
    """Least seconds between two fetch starts on a domain:
    INGEST_DOMAIN_MIN_INTERVAL_SECONDS, or its robots.txt's Crawl-delay when that is longer
    and robots.txt is obeyed, capped at INGEST_ROBOTS_CRAWL_DELAY_MAX_SECONDS so a hostile
    robots.txt cannot freeze its domain.

    interval = max(configured, min(crawl_delay, cap))
    """
    configured = settings.domain_min_interval_seconds
    if crawl_delay is None or settings.robots_txt != "obey":
        return configured
    return max(configured, min(crawl_delay, settings.robots_crawl_delay_max_seconds))


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
    started a fetch less than its `min_interval` ago (so at most one start per domain per
    claim when an interval is set).
    """
    served: dict[str, tuple[int, datetime]] = {
        tenant: (0, last or datetime.min.replace(tzinfo=now.tzinfo))
        for tenant, last in tenants_last_served.items()
    }
    # Each tenant's candidates in claim order; a heap of the tenants by their next one. A
    # candidate whose domain cannot start stays unable to for the rest of the claim (picks
    # only fill domains), so it is dropped: n log n, not a scan of all per pick.
    queues: dict[str, deque[Candidate]] = defaultdict(deque)
    for candidate in sorted(candidates, key=lambda c: (-c.priority, c.created_at, c.id)):
        queues[candidate.tenant].append(candidate)

    def next_of(tenant: str) -> tuple[tuple[object, ...], str]:
        head = queues[tenant][0]
        default = (0, now)
        return (-head.priority, served.get(tenant, default), head.created_at, head.id), tenant

    heap = [next_of(tenant) for tenant in queues]
    heapq.heapify(heap)
    state = dict(domains)
    chosen: list[Candidate] = []
    turn = 0
    while heap and len(chosen) < limit:
        _, tenant = heapq.heappop(heap)
        queue = queues[tenant]
        if not _may_start(state.get(queue[0].domain), now, settings):
            queue.popleft()
            if queue:
                heapq.heappush(heap, next_of(tenant))
            continue
        pick = queue.popleft()
        chosen.append(pick)
        turn += 1
        served[tenant] = (turn, now)
        domain = state.get(pick.domain, DomainState(0))
        state[pick.domain] = replace(
            domain, in_flight=domain.in_flight + 1, next_start_at=next_start(domain, now, settings)
        )
        if queue:
            heapq.heappush(heap, next_of(tenant))
    return chosen


def next_start(domain: DomainState | None, now: datetime, settings: Settings) -> datetime | None:
    """Before when no other fetch may start on a domain that starts one at `now` (None: no
    minimum interval)."""
    interval = min_interval(domain.crawl_delay if domain else None, settings)
    return now + timedelta(seconds=interval) if interval else None


def _may_start(domain: DomainState | None, now: datetime, settings: Settings) -> bool:
    if domain is None:
        return True
    if domain.paused_until is not None and domain.paused_until > now:
        return False
    if domain.next_start_at is not None and domain.next_start_at > now:
        return False
    return domain.in_flight < settings.domain_max_in_flight


def waiting_for(
    retry_after: datetime | None,
    domain: DomainState | None,
    now: datetime,
    max_in_flight: int | None,
) -> Blocked | None:
    """What holds a pending job back at `now`, by the rules the claim applies (`choose`, and
    the claim's SQL for `retry_after`); None if a claim may take it now.

    Of a domain pause, a `retry_after` and a domain's minimum interval, the one that ends
    last (the job waits for all of them; a pause wins a tie); else its domain at
    `max_in_flight` fetches (None: the limit is not known here, so not said).
    """
    domain = domain or DomainState(0)
    timed = [
        (until, reason)
        for until, reason in [
            (domain.paused_until, BlockReason.DOMAIN_PAUSED),
            (retry_after, BlockReason.NOT_DUE),
            (domain.next_start_at, BlockReason.DOMAIN_INTERVAL),
        ]
        if until is not None and until > now
    ]
    if timed:
        until, reason = max(timed, key=lambda pair: pair[0])
        detail = domain.pause_reason if reason is BlockReason.DOMAIN_PAUSED else None
        return Blocked(reason, until, detail)
    if max_in_flight is not None and domain.in_flight >= max_in_flight:
        return Blocked(BlockReason.DOMAIN_AT_LIMIT)
    return None
