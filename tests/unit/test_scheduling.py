"""app.scheduling: when a failure pauses a domain, and which candidates a claim takes."""

from datetime import UTC, datetime, timedelta

import pytest

from app.model import Blocked, BlockReason, DomainPause, ErrorKind, Failure
from app.policy import domain_pause
from app.scheduling import Candidate, DomainState, choose, waiting_for
from app.settings import Settings

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def settings(**overrides) -> Settings:
    values = {"backoff_base_seconds": 10, "backoff_max_seconds": 100, "backoff_jitter": 0.0}
    return Settings(_env_file=None, **(values | overrides))


def http(status: int, kind: ErrorKind, retry_after: str | None = None) -> Failure:
    return Failure(kind, "HTTPStatus", f"HTTP {status}", status, retry_after)


TIMEOUT = Failure(ErrorKind.TRANSIENT, "ConnectTimeout", "timed out")


@pytest.mark.parametrize(
    ("failure", "consecutive", "pause"),
    [
        (
            http(429, ErrorKind.RATE_LIMITED, "120"),
            1,
            DomainPause(NOW + timedelta(seconds=120), "HTTP 429, Retry-After 120s"),
        ),
        (
            http(429, ErrorKind.RATE_LIMITED),
            1,
            DomainPause(NOW + timedelta(seconds=10), "HTTP 429, backoff 10s"),
        ),
        (
            http(503, ErrorKind.RATE_LIMITED, "30"),
            1,
            DomainPause(NOW + timedelta(seconds=30), "HTTP 503, Retry-After 30s"),
        ),
        (
            http(503, ErrorKind.TRANSIENT),
            2,
            DomainPause(NOW + timedelta(seconds=20), "HTTP 503, backoff 20s"),
        ),
        (TIMEOUT, 2, None),
        (
            TIMEOUT,
            3,
            DomainPause(NOW + timedelta(seconds=40), "ConnectTimeout, backoff 40s"),
        ),
        (http(500, ErrorKind.TRANSIENT), 1, None),
        (
            http(500, ErrorKind.TRANSIENT),
            4,
            DomainPause(NOW + timedelta(seconds=80), "HTTP 500, backoff 80s"),
        ),
        (http(404, ErrorKind.FATAL), 9, None),
        (Failure(ErrorKind.FATAL, "NameNotFound", "nx"), 9, None),
    ],
)
def test_domain_pause(failure, consecutive, pause):
    """429/503 pause at once (Retry-After, else backoff); other transients at the threshold;
    fatal answers such as a 404 never."""
    assert pause == domain_pause(failure, consecutive, NOW, settings(), rand=lambda: 0.5)


def job(i: int, tenant: str = "a", domain: str = "d.test", priority: int = 0) -> Candidate:
    return Candidate(f"j{i}", tenant, domain, priority, NOW - timedelta(seconds=100 - i))


def ids(chosen: list[Candidate]) -> list[str]:
    return [c.id for c in chosen]


def test_priority_first_then_oldest():
    """Higher priority wins over age; equal priority goes oldest first."""
    candidates = [job(3), job(1), job(2, priority=5)]
    assert ["j2", "j1", "j3"] == ids(choose(candidates, {"a": None}, {}, 3, NOW, settings()))


def test_tenants_take_turns():
    """Tenants alternate within one claim, the least recently served first."""
    candidates = [job(i, "big") for i in range(5)] + [job(10 + i, "small") for i in range(2)]
    served = {"big": NOW - timedelta(seconds=1), "small": None}
    chosen = choose(candidates, served, {}, 5, NOW, settings())
    assert ["small", "big", "small", "big", "big"] == [c.tenant for c in chosen]


def test_priority_beats_fair_share():
    """A tenant's higher-priority job goes before another tenant's turn."""
    candidates = [job(1, "a", priority=1), job(2, "a", priority=1), job(3, "b")]
    chosen = choose(candidates, {"a": NOW, "b": None}, {}, 3, NOW, settings())
    assert ["j1", "j2", "j3"] == ids(chosen)


def test_in_flight_limit_holds_within_a_claim():
    """A domain with 6 of 8 fetches running gets 2 more; other domains fill the rest."""
    candidates = [job(i) for i in range(5)] + [job(10, domain="e.test")]
    domains = {"d.test": DomainState(in_flight=6)}
    chosen = choose(candidates, {"a": None}, domains, 10, NOW, settings())
    assert ["j0", "j1", "j10"] == ids(chosen)


def test_min_interval_allows_one_start_per_domain():
    """With a minimum interval, one claim starts at most one fetch per domain."""
    candidates = [job(1), job(2), job(3, domain="e.test")]
    chosen = choose(candidates, {"a": None}, {}, 10, NOW, settings(domain_min_interval_seconds=1))
    assert ["j1", "j3"] == ids(chosen)


def test_paused_or_waiting_domains_are_skipped():
    """A paused domain, or one whose interval has not passed, starts nothing."""
    candidates = [job(1, domain="p.test"), job(2, domain="w.test"), job(3)]
    domains = {
        "p.test": DomainState(0, paused_until=NOW + timedelta(seconds=1)),
        "w.test": DomainState(0, next_start_at=NOW + timedelta(seconds=1)),
        "d.test": DomainState(0, paused_until=NOW - timedelta(seconds=1)),
    }
    assert ["j3"] == ids(choose(candidates, {"a": None}, domains, 10, NOW, settings()))


def test_limit_is_respected():
    """Never more than the limit."""
    assert 2 == len(choose([job(i) for i in range(5)], {"a": None}, {}, 2, NOW, settings()))


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
