"""app.rules.scheduling: when a failure pauses a domain, and which candidates a claim takes."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.model import Blocked, BlockReason
from app.rules.scheduling import (
    PASS_UNIT,
    Candidate,
    DomainState,
    Served,
    ShareRules,
    TenantState,
    candidates_per_tenant,
    choose,
    passes_after,
    stride,
    waiting_for,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)

SHARES = ShareRules(
    domain_max_in_flight=8,
    domain_min_interval_seconds=0.0,
    robots_crawl_delay_max_seconds=None,
    tenant_max_in_flight=0,
    tenant_weights={},
)


def rules(**changes) -> ShareRules:
    return replace(SHARES, **changes)


def job(i: int, tenant: str = "a", domain: str = "d.test", priority: int = 0) -> Candidate:
    return Candidate(f"j{i}", tenant, domain, priority, NOW - timedelta(seconds=100 - i))


A = {"a": TenantState()}


def ids(chosen: list[Candidate]) -> list[str]:
    return [c.id for c in chosen]


def test_priority_first_then_oldest():
    """Higher priority wins over age; equal priority goes oldest first."""
    candidates = [job(3), job(1), job(2, priority=5)]
    assert ["j2", "j1", "j3"] == ids(choose(candidates, A, {}, 3, NOW, rules()))


def test_tenants_take_turns():
    """Tenants alternate within one claim, the least recently served first."""
    candidates = [job(i, "big") for i in range(5)] + [job(10 + i, "small") for i in range(2)]
    served = {"big": TenantState(0, NOW - timedelta(seconds=1)), "small": TenantState()}
    chosen = choose(candidates, served, {}, 5, NOW, rules())
    assert ["small", "big", "small", "big", "big"] == [c.tenant for c in chosen]


def test_priority_beats_fair_share():
    """A tenant's higher-priority job goes before another tenant's turn."""
    candidates = [job(1, "a", priority=1), job(2, "a", priority=1), job(3, "b")]
    chosen = choose(candidates, {"a": TenantState(0, NOW), "b": TenantState()}, {}, 3, NOW, rules())
    assert ["j1", "j2", "j3"] == ids(chosen)


def test_in_flight_limit_holds_within_a_claim():
    """A domain with 6 of 8 fetches running gets 2 more; other domains fill the rest."""
    candidates = [job(i) for i in range(5)] + [job(10, domain="e.test")]
    domains = {"d.test": DomainState(in_flight=6)}
    chosen = choose(candidates, A, domains, 10, NOW, rules())
    assert ["j0", "j1", "j10"] == ids(chosen)


def test_min_interval_allows_one_start_per_domain():
    """With a minimum interval, one claim starts at most one fetch per domain."""
    candidates = [job(1), job(2), job(3, domain="e.test")]
    chosen = choose(candidates, A, {}, 10, NOW, rules(domain_min_interval_seconds=1))
    assert ["j1", "j3"] == ids(chosen)


def test_paused_or_waiting_domains_are_skipped():
    """A paused domain, or one whose interval has not passed, starts nothing."""
    candidates = [job(1, domain="p.test"), job(2, domain="w.test"), job(3)]
    domains = {
        "p.test": DomainState(0, paused_until=NOW + timedelta(seconds=1)),
        "w.test": DomainState(0, next_start_at=NOW + timedelta(seconds=1)),
        "d.test": DomainState(0, paused_until=NOW - timedelta(seconds=1)),
    }
    assert ["j3"] == ids(choose(candidates, A, domains, 10, NOW, rules()))


def test_limit_is_respected():
    """Never more than the limit."""
    assert 2 == len(choose([job(i) for i in range(5)], A, {}, 2, NOW, rules()))


# Weighted fair share (stride scheduling) and tenants' in-flight quota.

UNLIMITED = {"domain_max_in_flight": 100_000}


def test_strides_are_exact_for_small_weights_and_close_for_large_ones():
    """1/weight of a pass unit: exact for weights 1-16, within 0.01 % up to 100."""
    assert all(PASS_UNIT == stride(w) * w for w in range(1, 17))
    assert all(abs(stride(w) * w - PASS_UNIT) / PASS_UNIT < 1e-4 for w in range(1, 101))


def backlog(tenant: str, n: int, start: int = 0) -> list[Candidate]:
    return [job(start + i, tenant) for i in range(n)]


def run_claims(weights: dict[str, int], claims: int, size: int = 32, **overrides) -> list[str]:
    """The tenants of `claims` claims of `size` in a row, every tenant backlogged (a fresh
    backlog each claim), each claim's passes carried to the next as the store would."""
    tuned = rules(tenant_weights=weights, **(UNLIMITED | overrides))
    tenants = {tenant: TenantState() for tenant in weights}
    floor = 0
    order: list[str] = []
    for i in range(claims):
        now = NOW + timedelta(seconds=i)
        candidates = [c for t in weights for c in backlog(t, size)]
        chosen = choose(candidates, tenants, {}, size, now, tuned, floor)
        for tenant, served in passes_after(chosen, tenants, tuned, floor).items():
            tenants[tenant] = TenantState(served.next_pass, now, 0)
            floor = max(floor, served.last_pass)
        order += [c.tenant for c in chosen]
    return order


def windows(order: list[str], tenant: str, size: int = 200) -> list[int]:
    """How many of each window of `size` consecutive picks went to `tenant`."""
    return [order[i : i + size].count(tenant) for i in range(len(order) - size + 1)]


def test_two_backlogged_tenants_at_3_to_1_split_3_to_1_in_every_window_of_200():
    """Weights 3:1: every window of 200 picks is 150:50, give or take one."""
    order = run_claims({"acme": 3, "globex": 1}, claims=40)
    assert 1280 == len(order)
    assert all(149 <= n <= 151 for n in windows(order, "acme"))


@pytest.mark.parametrize(
    "weights",
    [
        {"a": 1, "b": 1},
        {"a": 2, "b": 1},
        {"a": 5, "b": 2},
        {"a": 7, "b": 3},
        {"a": 100, "b": 1},
        {"a": 3, "b": 2, "c": 1},
        {"a": 1, "b": 1, "c": 1, "d": 1, "e": 97},
        {f"t{i}": i for i in range(1, 11)},
    ],
)
def test_every_window_gives_each_tenant_its_weights_share(weights):
    """Over any window of 200 picks each backlogged tenant gets its share of the weights,
    within one job per other tenant (at least 2: stride scheduling's bound, as tenants of
    one pass are served back to back), whatever the claim size."""
    total = sum(weights.values())
    tolerance = max(2, len(weights) - 1)
    for size in (1, 7, 32):
        order = run_claims(weights, claims=2000 // size, size=size)
        for tenant, weight in weights.items():
            share = 200 * weight / total
            assert all(abs(n - share) <= tolerance for n in windows(order, tenant)), (tenant, size)


def test_within_one_claim_a_heavier_tenant_takes_its_share_in_turns():
    """Level passes, weights 3:1, a claim of 8: 6 of acme and 2 of globex, interleaved by
    pass (a tie of passes to the tenant served longer ago, acme's older job first when
    neither was)."""
    tuned = rules(tenant_weights={"acme": 3}, **UNLIMITED)
    candidates = backlog("acme", 8) + backlog("globex", 8, start=20)
    tenants = {"acme": TenantState(), "globex": TenantState()}
    chosen = choose(candidates, tenants, {}, 8, NOW, tuned)
    assert ["acme", "globex", "acme", "acme", "globex", "acme", "acme", "acme"] == [
        c.tenant for c in chosen
    ]


def test_equal_passes_go_to_the_tenant_served_least_recently():
    """A tie of passes goes to the tenant served longest ago (never served: first)."""
    tenants = {
        "a": TenantState(5, NOW - timedelta(seconds=1)),
        "b": TenantState(5, NOW - timedelta(seconds=9)),
        "c": TenantState(5, None),
    }
    candidates = backlog("a", 1) + backlog("b", 1, 10) + backlog("c", 1, 20)
    chosen = choose(candidates, tenants, {}, 3, NOW, rules())
    assert ["c", "b", "a"] == [c.tenant for c in chosen]


def test_a_lower_pass_goes_first():
    """The tenant with the lower pass goes first, however recently it was served."""
    tenants = {"a": TenantState(1, NOW), "b": TenantState(2, None)}
    chosen = choose(backlog("a", 1) + backlog("b", 1, 10), tenants, {}, 2, NOW, rules())
    assert ["a", "b"] == [c.tenant for c in chosen]


def test_a_new_weight_1_tenant_starts_in_its_first_claim_beside_a_weight_100_one():
    """A tenant with no pass yet, beside one of weight 100 served for long: its first job is
    the claim's first pick, and it is not served again before its turn comes round."""
    tuned = rules(tenant_weights={"big": 100}, **UNLIMITED)
    big_pass = 1000 * PASS_UNIT
    tenants = {"big": TenantState(big_pass + stride(100), NOW), "new": TenantState()}
    floor = big_pass  # where big was last served
    candidates = backlog("big", 32) + backlog("new", 32, start=40)
    chosen = choose(candidates, tenants, {}, 32, NOW, tuned, floor)
    assert ["new"] + ["big"] * 31 == [c.tenant for c in chosen]


def test_a_tenant_back_from_idle_banks_no_credit():
    """A tenant idle while another was served 1,000 jobs comes back at the floor: equal
    weights alternate from there, where without the floor it would take every pick."""
    tenants = {"busy": TenantState(1001 * PASS_UNIT, NOW), "back": TenantState(0, None)}
    candidates = backlog("busy", 8) + backlog("back", 8, start=20)
    chosen = choose(candidates, tenants, {}, 8, NOW, rules(), floor=1000 * PASS_UNIT)
    assert ["back", "busy"] * 4 == [c.tenant for c in chosen]
    without_floor = choose(candidates, tenants, {}, 8, NOW, rules())
    assert ["back"] * 8 == [c.tenant for c in without_floor]


def test_priority_beats_weights():
    """A weight-1 tenant's higher-priority job goes before a weight-100 tenant's jobs."""
    tuned = rules(tenant_weights={"big": 100})
    candidates = [*backlog("big", 3), job(10, "small", priority=1)]
    tenants = {"big": TenantState(), "small": TenantState(10 * PASS_UNIT)}
    assert "small" == choose(candidates, tenants, {}, 4, NOW, tuned)[0].tenant


def test_passes_after_advance_each_served_tenant_by_its_strides_from_the_floor():
    """Each tenant served n jobs: its last job started at start + (n-1) strides, its next
    at start + n strides, start its pass lifted to the floor; tenants not served: absent."""
    tuned = rules(tenant_weights={"a": 4})
    tenants = {"a": TenantState(7), "b": TenantState(100 * PASS_UNIT), "c": TenantState()}
    chosen = backlog("a", 3) + backlog("b", 1, start=10)
    served = passes_after(chosen, tenants, tuned, floor=50)
    q = PASS_UNIT // 4
    assert {
        "a": Served(3, 50, 50 + 2 * q, 50 + 3 * q),
        "b": Served(1, 100 * PASS_UNIT, 100 * PASS_UNIT, 101 * PASS_UNIT),
    } == served


@pytest.mark.parametrize(
    ("limit", "in_flight", "expected"),
    [
        (0, 50, ["a", "b", "a", "b", "a", "b"]),  # no limit
        (2, 0, ["a", "b", "a", "b"]),
        (2, 1, ["a", "b", "b"]),
        (2, 2, ["b", "b"]),
        (2, 7, ["b", "b"]),  # over it (the limit was lowered): none
        (1, 0, ["a", "b"]),
    ],
)
def test_a_tenant_at_its_in_flight_quota_gets_no_more(limit, in_flight, expected):
    """INGEST_TENANT_MAX_IN_FLIGHT counts a tenant's running jobs (a: `in_flight`, b: none)
    and this claim's picks: the claim of 6 takes no more than each tenant's room."""
    tuned = rules(tenant_max_in_flight=limit, **UNLIMITED)
    tenants = {"a": TenantState(0, None, in_flight), "b": TenantState(0, NOW, 0)}
    candidates = backlog("a", 6) + backlog("b", 6, start=10)
    assert expected == [c.tenant for c in choose(candidates, tenants, {}, 6, NOW, tuned)]


def test_the_quota_is_per_tenant():
    """Two tenants at limit 2 get 2 each, whatever the claim could take."""
    tuned = rules(tenant_max_in_flight=2, **UNLIMITED)
    candidates = backlog("a", 5) + backlog("b", 5, start=10)
    chosen = choose(candidates, {"a": TenantState(), "b": TenantState()}, {}, 10, NOW, tuned)
    assert (2, 2) == tuple(sum(c.tenant == t for c in chosen) for t in "ab")


PAUSED = DomainState(0, paused_until=NOW + timedelta(minutes=5), pause_reason="HTTP 429")


@pytest.mark.parametrize(
    ("retry_after", "domain", "expected"),
    [
        (None, None, None),
        (None, DomainState(3), None),
        (NOW, DomainState(3), None),
        (
            NOW + timedelta(seconds=1),
            None,
            Blocked(BlockReason.NOT_DUE, NOW + timedelta(seconds=1)),
        ),
        (None, PAUSED, Blocked(BlockReason.DOMAIN_PAUSED, NOW + timedelta(minutes=5), "HTTP 429")),
        # The job waits for both: what ends last is what holds it back.
        (
            NOW + timedelta(minutes=9),
            PAUSED,
            Blocked(BlockReason.NOT_DUE, NOW + timedelta(minutes=9)),
        ),
        (
            NOW + timedelta(minutes=5),
            PAUSED,
            Blocked(BlockReason.DOMAIN_PAUSED, NOW + timedelta(minutes=5), "HTTP 429"),
        ),
        (None, DomainState(0, paused_until=NOW, pause_reason="over"), None),
        (
            None,
            DomainState(0, next_start_at=NOW + timedelta(seconds=2)),
            Blocked(BlockReason.DOMAIN_INTERVAL, NOW + timedelta(seconds=2)),
        ),
        (None, DomainState(8), Blocked(BlockReason.DOMAIN_AT_LIMIT)),
        (None, DomainState(9), Blocked(BlockReason.DOMAIN_AT_LIMIT)),
        (None, DomainState(7), None),
    ],
)
def test_waiting_for(retry_after, domain, expected):
    """What holds a pending job back, by the claim's rules, with a limit of 8 in flight."""
    assert expected == waiting_for(retry_after, domain, NOW, 8)


def test_waiting_for_without_a_known_limit():
    """A reader that does not know the in-flight limit never says a job waits for it."""
    assert None is waiting_for(None, DomainState(1000), NOW, None)


@pytest.mark.parametrize(
    ("tenant_in_flight", "tenant_limit", "domain", "expected"),
    [
        (3, 3, None, Blocked(BlockReason.TENANT_AT_LIMIT)),
        (4, 3, None, Blocked(BlockReason.TENANT_AT_LIMIT)),
        (2, 3, None, None),
        (3, 0, None, None),  # no tenants' limit
        (None, 3, None, None),  # the tenant's count not known here
        (3, 3, DomainState(8), Blocked(BlockReason.DOMAIN_AT_LIMIT)),  # the domain's says first
        (
            3,
            3,
            DomainState(0, NOW + timedelta(seconds=5)),
            Blocked(BlockReason.DOMAIN_INTERVAL, NOW + timedelta(seconds=5)),
        ),
    ],
)
def test_waiting_for_a_tenants_jobs(tenant_in_flight, tenant_limit, domain, expected):
    """A tenant at INGEST_TENANT_MAX_IN_FLIGHT holds its job back, after what has an end."""
    assert expected == waiting_for(None, domain, NOW, 8, tenant_in_flight, tenant_limit)


@pytest.mark.parametrize(
    ("weights", "limit", "quota", "counts"),
    [
        ([1] * 32, 32, 0, [2] * 32),  # equal shares: one job each in turn, twice that
        ([1, 1], 32, 0, [32, 32]),  # two tenants: half the claim each, twice that
        ([1], 32, 0, [64]),  # alone: at most twice the claim
        ([1], 32, 5, [5]),  # never more than the quota lets one claim take
        ([1, 3], 8, 0, [4, 12]),  # by each one's own weight
        ([1, 2, 3, 4, 5] * 6, 32, 0, [2, 2, 3, 3, 4] * 6),  # the light ones at the floor
        ([1, 100], 4, 0, [2, 8]),  # never below 2
        ([1, 100], 4, 1, [1, 1]),  # ... unless the quota says fewer
    ],
)
def test_candidates_per_tenant(weights, limit, quota, counts):
    assert counts == candidates_per_tenant(weights, limit, quota)
