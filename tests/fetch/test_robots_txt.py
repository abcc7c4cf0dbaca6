"""app.fetch.robots_reader.RobotsTxt against a mocked transport: what is read of robots.txt (cap,
redirects, coding), how often (once per origin per TTL, one read for concurrent checks),
where it is parsed (the extraction pool, whose deadline makes it unreachable), and the bound
on an unreachable one. Times come from a clock the tests move."""

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, TypeVarTuple

import httpx
import pytest

from app.content.extract import ExtractionLimits
from app.fetch.fetcher import Fetcher, FetchLimits
from app.fetch.pool import ExtractionPool, ExtractionTimeout, PoolSettings
from app.fetch.robots_reader import RobotsLimits, RobotsTxt
from app.model import ErrorKind
from app.rules.robots import ROBOTS_UNREACHABLE, parse
from app.settings import DEFAULT_CONTENT_TYPES, DEFAULT_TRANSIENT_ERRORS

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)

FETCHING = FetchLimits(
    connections=8,
    connect_timeout_seconds=10.0,
    read_timeout_seconds=20.0,
    fetch_timeout_seconds=30.0,
    max_redirects=5,
    max_body_bytes=10 * 1024 * 1024,
    allowed_content_types=DEFAULT_CONTENT_TYPES,
    user_agent="ingest/0.1",
    transient_errors=DEFAULT_TRANSIENT_ERRORS,
    transient_status_codes=frozenset({408, *range(500, 600)}),
    extraction=PoolSettings(
        processes=0, timeout_seconds=15.0, memory_mb=1024, limits=ExtractionLimits()
    ),
)
"""The fetcher's limits, which robots.txt is read within: its User-Agent, `ingest`."""
ROBOTS = RobotsLimits(cache_seconds=86400.0, max_bytes=512 * 1024, unreachable_max_seconds=86400.0)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def make() -> AsyncIterator[Callable[..., tuple[RobotsTxt, list[str], Clock]]]:
    """A RobotsTxt on a fetcher whose transport answers with `handler`; the URLs asked."""
    fetchers: list[Fetcher] = []

    def build(
        handler: Callable[[httpx.Request], httpx.Response],
        parsing: ExtractionPool | None = None,
        **overrides: Any,
    ):
        asked: list[str] = []

        def record(request: httpx.Request) -> httpx.Response:
            asked.append(str(request.url))
            return handler(request)

        fetcher = Fetcher(FETCHING, transport=httpx.MockTransport(record))
        fetchers.append(fetcher)
        clock = Clock()
        return RobotsTxt(fetcher, replace(ROBOTS, **overrides), clock, parsing), asked, clock

    yield build
    for fetcher in fetchers:
        await fetcher.aclose()


class _Raw(httpx.AsyncByteStream):
    """A body streamed as a server's is (a Response built from bytes is read at once)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.raw


def text(body: str | bytes, status: int = 200, **headers: str) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    return httpx.Response(status, headers=headers, stream=_Raw(content))


async def test_read_once_per_origin_and_applied_per_url(make):
    """One read of http://a.test/robots.txt serves both URLs of that origin; another port
    is another origin."""
    robots, asked, _ = make(lambda _: text("User-agent: *\nDisallow: /no\n"))
    refused = await robots.check("http://a.test/no/1?x=1")
    allowed = await robots.check("http://a.test/yes")
    other = await robots.check("http://a.test:8080/yes")
    assert ("RobotsDisallowed", None, None) == (
        refused.refusal and refused.refusal.type,
        allowed.refusal,
        other.refusal,
    )
    assert ["http://a.test/robots.txt", "http://a.test:8080/robots.txt"] == asked


async def test_only_the_check_that_read_it_carries_the_rules(make):
    """The check that read robots.txt carries its rules (for the Crawl-delay to be kept);
    a later one, served from memory, does not."""
    robots, _, _ = make(lambda _: text("User-agent: *\nCrawl-delay: 3\n"))
    first = await robots.check("http://a.test/1")
    second = await robots.check("http://a.test/2")
    assert (3.0, None) == (first.read and first.read.crawl_delay("ingest"), second.read)


async def test_concurrent_checks_share_one_read(make):
    """Ten jobs of one origin checking at once cause one request."""
    robots, asked, _ = make(lambda _: text("User-agent: *\nAllow: /\n"))
    checks = await asyncio.gather(*(robots.check(f"http://a.test/{i}") for i in range(10)))
    assert (1, [None] * 10) == (len(asked), [c.refusal for c in checks])
    assert 1 == sum(c.read is not None for c in checks)


async def test_read_again_after_the_ttl(make):
    """Past INGEST_ROBOTS_CACHE_SECONDS robots.txt is asked again, and its new rules hold."""
    answers = iter([text("User-agent: *\nAllow: /\n"), text("User-agent: *\nDisallow: /\n")])
    robots, asked, clock = make(lambda _: next(answers), cache_seconds=60)
    before = await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=59)
    still = await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=60)
    after = await robots.check("http://a.test/x")
    assert (None, None, "RobotsDisallowed") == (
        before.refusal,
        still.refusal,
        after.refusal and after.refusal.type,
    )
    assert 2 == len(asked)


async def test_the_body_is_read_up_to_the_cap_and_a_cut_line_dropped(make):
    """Of a robots.txt past INGEST_ROBOTS_MAX_BYTES the rest is not read, and the line the
    cap cuts is not read shorter than written (`Disallow: /ab` is not `Disallow: /a`)."""
    cap = 500 * 1024
    head = "User-agent: *\n" + "# padding\n" * ((cap - 100) // 10)
    body = head + "Disallow: /early\n"
    body += "Disallow: /a" + "b" * (cap - len(body.encode()) + 10) + "\n"
    body += "Disallow: /late\n"
    robots, _, _ = make(lambda _: text(body), max_bytes=cap)
    results = [
        (await robots.check(f"http://a.test{path}")).refusal is None
        for path in ("/early", "/a", "/late")
    ]
    assert [False, True, True] == results


async def test_a_gzip_body_is_inflated(make):
    """A gzip-coded robots.txt is read as its text."""
    robots, _, _ = make(
        lambda _: text(
            gzip.compress(b"User-agent: *\nDisallow: /\n"), 200, **{"content-encoding": "gzip"}
        )
    )
    check = await robots.check("http://a.test/x")
    assert "RobotsDisallowed" == (check.refusal and check.refusal.type)


def redirects(hops: int) -> Callable[[httpx.Request], httpx.Response]:
    """/robots.txt redirects `hops` times before the rules (Disallow: /) answer."""

    def handler(request: httpx.Request) -> httpx.Response:
        step = int(request.url.params.get("hop", "0"))
        if step < hops:
            return httpx.Response(301, headers={"location": f"/robots.txt?hop={step + 1}"})
        return text("User-agent: *\nDisallow: /\n")

    return handler


@pytest.mark.parametrize(("hops", "allowed"), [(0, False), (5, False), (6, True)])
async def test_five_redirects_are_followed_and_more_allow_all(make, hops: int, allowed: bool):
    """RFC 9309: five redirects are followed; past them robots.txt is unavailable."""
    robots, asked, _ = make(redirects(hops))
    check = await robots.check("http://a.test/x")
    assert (allowed, min(hops, 5) + 1) == (check.refusal is None, len(asked))


async def test_unreachable_holds_jobs_back_until_the_bound_then_allows(make):
    """A robots.txt answering 503: each check asks again and fails transient; from
    INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS after the first failure on, everything is allowed
    (and kept, not asked again)."""
    robots, asked, clock = make(lambda _: text("busy", 503), unreachable_max_seconds=600)
    first = await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=599)
    second = await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=600)
    given_up = await robots.check("http://a.test/x")
    kept = await robots.check("http://a.test/y")
    assert [(ErrorKind.TRANSIENT, ROBOTS_UNREACHABLE)] * 2 == [
        (c.refusal.kind, c.refusal.type) for c in (first, second) if c.refusal
    ]
    assert (None, None, 3) == (given_up.refusal, kept.refusal, len(asked))


async def test_a_success_ends_the_unreachable_run(make):
    """A read that succeeds between failures starts the bound afresh for the next run."""
    answers = iter([text("", 503), text("User-agent: *\n"), text("", 503)])
    robots, _, clock = make(lambda _: next(answers), unreachable_max_seconds=600, cache_seconds=60)
    await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=300)
    await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=700)
    again = await robots.check("http://a.test/x")
    assert ROBOTS_UNREACHABLE == (again.refusal and again.refusal.type)


async def test_a_connection_error_is_unreachable(make):
    """A refused connection is unreachable: transient, its error said of robots.txt."""

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    robots, _, _ = make(refuse)
    check = await robots.check("http://a.test/x")
    assert check.refusal is not None
    assert (ErrorKind.TRANSIENT, "robots.txt unreachable: ConnectError: refused") == (
        check.refusal.kind,
        check.refusal.message,
    )


async def test_a_429_is_rate_limited_with_its_retry_after(make):
    """A 429 on robots.txt defers the job like any 429, its Retry-After kept."""
    robots, _, _ = make(lambda _: text("slow down", 429, **{"retry-after": "30"}))
    check = await robots.check("http://a.test/x")
    assert check.refusal is not None
    assert (ErrorKind.RATE_LIMITED, 429, "30") == (
        check.refusal.kind,
        check.refusal.http_status,
        check.refusal.retry_after,
    )


T = TypeVar("T")
Ts = TypeVarTuple("Ts")


class Recording(ExtractionPool):
    """The extraction pool (its thread: processes=0), noting each call; or, `stuck`, one
    whose every call ends past its deadline."""

    def __init__(self, stuck: bool = False) -> None:
        super().__init__(FETCHING.extraction)
        self.stuck = stuck
        self.calls: list[tuple[Any, ...]] = []

    async def call(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        self.calls.append((fn, *args))
        if self.stuck:
            raise ExtractionTimeout("not done within 15s (INGEST_EXTRACT_TIMEOUT_SECONDS)")
        return await super().call(fn, *args)


async def test_a_2xx_is_parsed_by_the_extraction_pool(make):
    """A 2xx's body goes to the extraction pool's `call` (the processes, off the loop) to be
    parsed for our token; a 404 needs no parse."""
    pool = Recording()

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.host == "a.test":
            return text("User-agent: *\nDisallow: /no\n")
        return text("", 404)

    robots, _, _ = make(answer, parsing=pool)
    check = await robots.check("http://a.test/no/1")
    await robots.check("http://b.test/no/1")
    pool.close()
    assert ("RobotsDisallowed", [(parse, b"User-agent: *\nDisallow: /no\n", "ingest")]) == (
        check.refusal and check.refusal.type,
        pool.calls,
    )


async def test_a_parse_past_its_deadline_is_unreachable_until_the_bound(make, caplog):
    """robots.txt not parsed within the extraction deadline: its jobs fail as when it is
    unreachable (transient, retried; read and parsed again next time, the reason logged),
    and from INGEST_ROBOTS_UNREACHABLE_MAX_SECONDS on everything is allowed."""
    pool = Recording(stuck=True)
    robots, asked, clock = make(
        lambda _: text("User-agent: *\nDisallow: /\n"), parsing=pool, unreachable_max_seconds=600
    )
    first = await robots.check("http://a.test/x")
    clock.now = T0 + timedelta(seconds=600)
    given_up = await robots.check("http://a.test/x")
    pool.close()
    assert first.refusal is not None
    assert (
        ErrorKind.TRANSIENT,
        ROBOTS_UNREACHABLE,
        "robots.txt not parsed: not done within 15s (INGEST_EXTRACT_TIMEOUT_SECONDS)",
    ) == (first.refusal.kind, first.refusal.type, first.refusal.message)
    assert (None, 2, 2) == (given_up.refusal, len(asked), len(pool.calls))
    assert "robots.txt http://a.test/robots.txt not parsed: not done within 15s" in caplog.text


async def test_what_the_caps_cut_is_logged(make, caplog):
    """A robots.txt past the caps is read cut, and the worker's log says what was cut."""
    body = "User-agent: *\n" + "".join(f"Disallow: /{i}/*x\n" for i in range(200))
    robots, _, _ = make(lambda _: text(body))
    check = await robots.check("http://a.test/150/x")
    assert (None, 1) == (check.refusal, caplog.text.count("72 with '*' past 128"))
