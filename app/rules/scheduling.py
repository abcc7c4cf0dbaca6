"""The claim's picking rule: a pure function, no I/O, time as an argument.

`choose` takes which of the claim's candidate jobs to claim, honouring priority, fair share
across tenants (weighted), each tenant's in-flight quota and each domain's politeness
limits; `passes_after` says where the tenants it served stand after. The store's claim
(`app.store.claim`) finds the candidates and locks the domains' rows (and, with a quota,
the tenants'); this module decides among them. `waiting_for` says which of the same rules
holds a pending job back, for operators.

Fair share is stride scheduling: each tenant has a pass, the virtual time at which its next
job starts; among candidates of the same priority the tenant with the lowest pass goes
next, and each job it is served advances its pass by its stride, `PASS_UNIT / weight`: two
backlogged tenants of weights 3 and 1 are served 3 jobs to 1. How a tenant back from idle
starts: `choose`.
"""

import heapq
import math
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from app.model import Blocked, BlockReason


@dataclass(frozen=True, slots=True)
class ShareRules:
    """The claim's rules of who goes next and how much may run at once: the domains'
    politeness limits, the tenants' quota and weights. Built once from the settings by the
    composition root (`app.runtime`); the store's claim reads them too."""

    domain_max_in_flight: int
    domain_min_interval_seconds: float
    robots_crawl_delay_max_seconds: float | None
    """The longest Crawl-delay honoured; None: every tenant ignores robots.txt, its Crawl-delay
    too."""
    tenant_max_in_flight: int
    """0: no limit."""
    tenant_weights: Mapping[str, int]

    def tenant_weight(self, tenant: str) -> int:
        """`tenant`'s weight (INGEST_TENANT_WEIGHTS; 1 for a tenant not named)."""
        return self.tenant_weights.get(tenant, 1)


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


PASS_UNIT = 720_720
"""A weight-1 tenant's stride: the least common multiple of 1 to 16, so the strides of those
weights are exact; a larger weight's is rounded, off by less than 0.01 %."""


def stride(weight: int) -> int:
    """How far one job served advances the pass of a tenant of `weight`."""
    return round(PASS_UNIT / weight)


@dataclass(frozen=True)
class TenantState:
    """What the claim reads of a tenant with candidates (its row, locked)."""

    next_pass: int = 0
    """The virtual time at which its next job starts."""
    last_served_at: datetime | None = None
    """Breaks ties of pass: the tenant served least recently goes first."""
    in_flight: int = 0
    """Its running jobs, for INGEST_TENANT_MAX_IN_FLIGHT."""


@dataclass(frozen=True)
class Served:
    """Where a tenant served by a claim stands after it (`passes_after`)."""

    jobs: int
    first_pass: int
    """The pass its first job of the claim started at: its own, lifted to the floor."""
    last_pass: int
    """The pass its last job of the claim started at."""
    next_pass: int


@dataclass(frozen=True)
class DomainState:
    in_flight: int
    next_start_at: datetime | None = None
    paused_until: datetime | None = None
    pause_reason: str | None = None
    """Said by `waiting_for`; not used to choose."""
    crawl_delay: float | None = None
    """The Crawl-delay its robots.txt asked when a worker last read it (`min_interval`)."""


def min_interval(crawl_delay: float | None, rules: ShareRules) -> float:
    """Least seconds between two fetch starts on a domain:
    INGEST_DOMAIN_MIN_INTERVAL_SECONDS, or its robots.txt's Crawl-delay when that is longer
    and robots.txt is obeyed, capped at INGEST_ROBOTS_CRAWL_DELAY_MAX_SECONDS so a hostile
    robots.txt cannot freeze its domain.

    interval = max(configured, min(crawl_delay, cap))
    """
    configured = rules.domain_min_interval_seconds
    cap = rules.robots_crawl_delay_max_seconds
    if crawl_delay is None or cap is None:
        return configured
    return max(configured, min(crawl_delay, cap))


def choose(
    candidates: Sequence[Candidate],
    tenants: dict[str, TenantState],
    domains: dict[str, DomainState],
    limit: int,
    now: datetime,
    rules: ShareRules,
    floor: int = 0,
) -> list[Candidate]:
    """Pick up to `limit` candidates in claim order.

    Order: higher priority first; then the tenant of the lowest pass, never below `floor`
    (each pick advances it by the tenant's stride, so tenants take turns in proportion to
    their weights); on a tie, the tenant served least recently (one served in this very
    claim goes to the back); then the oldest job. A job is skipped while its tenant has
    `tenant_max_in_flight` jobs running (0: no limit), or its domain is paused, has
    `domain_max_in_flight` fetches running, or started a fetch less than its
    minimum interval ago (`min_interval`: so at most one start per domain per claim when
    there is one).

    `floor` is the highest pass any tenant was last served at (`last_pass`, the system's
    virtual time now): a tenant back from idle (or from waiting on a paused domain) starts
    level with the busiest, so it cannot bank credit and then shut the others out, and ties
    go to the tenant served least recently, so it goes first.
    """
    passes = {tenant: _start(state, floor) for tenant, state in tenants.items()}
    served: dict[str, tuple[int, datetime]] = {
        tenant: (0, state.last_served_at or datetime.min.replace(tzinfo=now.tzinfo))
        for tenant, state in tenants.items()
    }
    running = {tenant: state.in_flight for tenant, state in tenants.items()}
    # Each tenant's candidates in claim order; a heap of the tenants by their next one. A
    # candidate whose domain cannot start stays unable to for the rest of the claim (picks
    # only fill domains), so it is dropped: n log n, not a scan of all per pick.
    queues: dict[str, deque[Candidate]] = defaultdict(deque)
    for candidate in sorted(candidates, key=lambda c: (-c.priority, c.created_at, c.id)):
        queues[candidate.tenant].append(candidate)

    def next_of(tenant: str) -> tuple[tuple[object, ...], str]:
        head = queues[tenant][0]
        last = served.get(tenant, (0, now))
        key = (-head.priority, passes.get(tenant, floor), last, head.created_at, head.id)
        return key, tenant

    heap = [next_of(tenant) for tenant in queues]
    heapq.heapify(heap)
    state = dict(domains)
    chosen: list[Candidate] = []
    turn = 0
    tenant_limit = rules.tenant_max_in_flight
    while heap and len(chosen) < limit:
        _, tenant = heapq.heappop(heap)
        queue = queues[tenant]
        if tenant_limit and running.get(tenant, 0) >= tenant_limit:
            continue  # its other candidates cannot start in this claim either
        if not _may_start(state.get(queue[0].domain), now, rules):
            queue.popleft()
            if queue:
                heapq.heappush(heap, next_of(tenant))
            continue
        pick = queue.popleft()
        chosen.append(pick)
        turn += 1
        served[tenant] = (turn, now)
        running[tenant] = running.get(tenant, 0) + 1
        passes[tenant] = passes.get(tenant, floor) + stride(rules.tenant_weight(tenant))
        domain = state.get(pick.domain, DomainState(0))
        state[pick.domain] = replace(
            domain, in_flight=domain.in_flight + 1, next_start_at=next_start(domain, now, rules)
        )
        if queue:
            heapq.heappush(heap, next_of(tenant))
    return chosen


def next_start(domain: DomainState | None, now: datetime, rules: ShareRules) -> datetime | None:
    """Before when no other fetch may start on a domain that starts one at `now` (None: no
    minimum interval)."""
    interval = min_interval(domain.crawl_delay if domain else None, rules)
    return now + timedelta(seconds=interval) if interval else None


def passes_after(
    chosen: Sequence[Candidate],
    tenants: dict[str, TenantState],
    rules: ShareRules,
    floor: int = 0,
) -> dict[str, Served]:
    """Where each tenant `choose` served stands after its claim: how many jobs, and its
    passes (the same `tenants` and `floor` as given to `choose`)."""
    counts: dict[str, int] = defaultdict(int)
    for candidate in chosen:
        counts[candidate.tenant] += 1
    served = {}
    for tenant, n in counts.items():
        step = stride(rules.tenant_weight(tenant))
        start = _start(tenants.get(tenant, TenantState()), floor)
        served[tenant] = Served(n, start, start + (n - 1) * step, start + n * step)
    return served


def _start(tenant: TenantState, floor: int) -> int:
    """A tenant's pass as a claim reads it: never below the floor (no banked credit)."""
    return max(tenant.next_pass, floor)


def _may_start(domain: DomainState | None, now: datetime, rules: ShareRules) -> bool:
    if domain is None:
        return True
    if domain.paused_until is not None and domain.paused_until > now:
        return False
    if domain.next_start_at is not None and domain.next_start_at > now:
        return False
    return domain.in_flight < rules.domain_max_in_flight


def waiting_for(
    retry_after: datetime | None,
    domain: DomainState | None,
    now: datetime,
    max_in_flight: int | None,
    tenant_in_flight: int | None = None,
    tenant_max_in_flight: int = 0,
) -> Blocked | None:
    """What holds a pending job back at `now`, by the rules the claim applies (`choose`, and
    the claim's SQL for `retry_after`); None if a claim may take it now.

    Of a domain pause, a `retry_after` and a domain's minimum interval, the one that ends
    last (the job waits for all of them; a pause wins a tie); else its domain at
    `max_in_flight` fetches (None: the limit is not known here, so not said); else its
    tenant at `tenant_max_in_flight` jobs running (0: no limit; `tenant_in_flight` None:
    not known here).
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
    if tenant_max_in_flight and tenant_in_flight is not None:
        if tenant_in_flight >= tenant_max_in_flight:
            return Blocked(BlockReason.TENANT_AT_LIMIT)
    return None


def candidates_per_tenant(weights: list[int], limit: int, quota: int) -> list[int]:
    """How many candidates each waiting tenant (of these `weights`) offers a claim of
    `limit`: twice the share its weight would get in turn, at least 2 (room for jobs that
    domain limits turn away within this claim, without locking far more candidates than
    one claim takes), never more than its `quota` (INGEST_TENANT_MAX_IN_FLIGHT; 0: none)
    lets one claim take. Each by its own weight, not the heaviest's for every tenant, which
    locked far more rows (docs/design/worker.md)."""
    total = sum(weights)
    most = min(2 * limit, quota or 2 * limit)
    return [min(most, max(2, math.ceil(2 * limit * weight / total))) for weight in weights]
