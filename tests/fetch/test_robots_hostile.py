"""A hostile robots.txt against real extraction processes: parsed there, under their
deadline, and cut to the caps, while the worker's loop keeps ticking; and the pool's `call`
that carries it there."""

import asyncio
import os
import time
from dataclasses import replace

import httpx
import pytest

from app.content.extract import ExtractionLimits
from app.fetch.fetcher import Fetcher
from app.fetch.pool import ExtractionPool, ExtractionTimeout, PoolSettings
from app.fetch.robots_reader import RobotsTxt
from app.rules.robots import MAX_WILDCARD_RULES, Cut
from tests.fetch.test_robots_txt import FETCHING, ROBOTS, Clock, text
from tests.support.hostile import wildcard_robots_txt


def pool(processes: int = 1, timeout: float = 30.0) -> ExtractionPool:
    return ExtractionPool(PoolSettings(processes, timeout, 1024, ExtractionLimits()))


async def test_call_runs_a_function_in_a_process_or_else_in_the_thread() -> None:
    """`call` runs a module's function in an extraction process; with no processes, in the
    pool's thread, in this process."""
    processes, thread = pool(1), pool(0)
    try:
        pids = (await processes.call(os.getpid), await thread.call(os.getpid))
    finally:
        processes.close()
        thread.close()
    assert (True, os.getpid()) == (pids[0] != os.getpid(), pids[1])


async def test_call_past_its_deadline_is_killed_and_the_pool_goes_on() -> None:
    """A call that would take 30 s ends ExtractionTimeout at the deadline, and the next call
    is answered by a new process."""
    extraction = pool(1, timeout=0.5)
    try:
        with pytest.raises(ExtractionTimeout, match="INGEST_EXTRACT_TIMEOUT_SECONDS"):
            await extraction.call(time.sleep, 30)
        pid = await extraction.call(os.getpid)
    finally:
        extraction.close()
    assert pid != os.getpid()


async def longest_gap(stop: asyncio.Event) -> float:
    """The longest the loop went between ticks 10 ms apart, until `stop` is set."""
    longest, last = 0.0, time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.01)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    return longest


async def test_a_hostile_robots_txt_leaves_the_loop_free() -> None:
    """The issue's robots.txt (17,000 rules of seven `*`) read for 40 URLs checked at once,
    half of them disallowed by an early rule, half by none: parsed in a process and cut to
    MAX_WILDCARD_RULES, it never holds the loop for long (parsed on the loop and matched
    whole, it held it for over a second), and each URL gets its answer."""
    body = wildcard_robots_txt()
    extraction = replace(FETCHING.extraction, processes=1)
    fetcher = Fetcher(
        replace(FETCHING, extraction=extraction),
        transport=httpx.MockTransport(lambda _: text(body)),
    )
    await asyncio.to_thread(fetcher.extraction.warm)  # starting processes is not measured
    robots = RobotsTxt(fetcher, ROBOTS, Clock())
    stop = asyncio.Event()
    ticking = asyncio.create_task(longest_gap(stop))
    try:
        urls = [f"http://a.test/aaaaaaa{i:04x}/{'a' * 1000}" for i in range(20)]
        urls += [f"http://a.test/page/{i}/{'a' * 1000}" for i in range(20)]
        checks = await asyncio.gather(*(robots.check(url) for url in urls))
    finally:
        stop.set()
        longest = await ticking
        await fetcher.aclose()
    [read] = [c.read for c in checks if c.read is not None]
    refusals = ["RobotsDisallowed"] * 20 + [None] * 20
    assert (Cut(wildcard_rules=17_000 - MAX_WILDCARD_RULES), refusals) == (
        read.cut,
        [c.refusal and c.refusal.type for c in checks],
    )
    # Loose, for a busy box: what is left on the loop is milliseconds.
    assert longest < 0.5, longest
