"""Extraction turns go round the tenants (`app.fetch.turns`), with real extraction
processes: a tenant whose slow pages fill the processes does not hold another tenant's page
behind all of them; and the worker takes a job's turn as its tenant's, on both backends."""

import asyncio

from app.content.extract import ExtractionLimits
from app.fetch.pool import SMALL_PAGE_BYTES, ExtractionPool, PoolSettings, where
from tests.conftest import running_app, submit, wait_for_status
from tests.support.webserver import Reply

SLOW = b"<html><body>" + b"<p>x</p>" * 12_000 + b"</body></html>"
"""Under every cap, yet it holds a process long after a small page would be done."""
QUICK = (
    b"<html><head><title>Quick</title></head><body><article>"
    + b"<p>A paragraph long enough to be the main text of this page, surely.</p>" * 150
    + b"</article></body></html>"
)


async def test_a_tenants_page_is_not_held_behind_all_of_another_tenants_slow_pages() -> None:
    """Tenant a has six slow pages at the two processes (two running, one queued behind
    them, three waiting for a turn) when b's page comes: b's page is extracted once two of
    a's have ended, and is done before a third. In one queue for all tenants, it came after
    five of a's."""
    pool = ExtractionPool(PoolSettings(2, 120, 1024, ExtractionLimits()))
    finished: list[str] = []

    async def extract(tenant: str, name: str, body: bytes) -> None:
        async with pool.turn(len(body), tenant):
            await pool.extract(body, "text/html", None)
        finished.append(name)

    try:
        # Both processes started and warm, so that a's pages take as long in either.
        await asyncio.gather(*(pool.extract(QUICK, "text/html", None) for _ in range(2)))
        # Tasks run in the order made: a's six take their turns (or wait) before b asks.
        slow = [asyncio.create_task(extract("a", f"a{n}", SLOW)) for n in range(6)]
        quick = asyncio.create_task(extract("b", "b", QUICK))
        await asyncio.gather(*slow, quick)
    finally:
        pool.close()
    assert finished.index("b") <= 2, finished


async def test_a_small_page_bound_for_the_processes_waits_for_its_turn_too() -> None:
    """A page of a few hundred bytes with too many tags for the loop goes to the processes:
    it waits for a turn as its tenant's while another tenant holds the process's, rather
    than go straight into the pool's queue."""
    pool = ExtractionPool(PoolSettings(1, 120, 1024, ExtractionLimits()))
    small = b"<p>x</p>" * 100
    try:
        async with pool.turn(SMALL_PAGE_BYTES + 1, "a"):
            extraction = asyncio.create_task(pool.extract(small, "text/html", None, "b"))
            await asyncio.sleep(0)  # a yield: the task asks for its turn
            waiting = ("b" in pool._turns._waiting, extraction.done())
        document = await extraction
    finally:
        pool.close()
    assert ("process", (True, False), "x") == (
        where("text/html", small),
        waiting,
        document.text[:1],
    )


async def test_a_jobs_body_waits_for_its_turn_as_its_tenants(make_settings, web, monkeypatch):
    """The worker passes the job's tenant down to the extraction turns."""
    tenants: list[str] = []
    real_turn = ExtractionPool.turn

    def turn(self: ExtractionPool, size: int, tenant: str):
        tenants.append(tenant)
        return real_turn(self, size, tenant)

    monkeypatch.setattr(ExtractionPool, "turn", turn)
    async with running_app(make_settings(extract_processes=1)) as (_, client):
        url = web.script("/quick", Reply(200, QUICK, "text/html"))
        job = await submit(client, url, tenant="acme")
        await wait_for_status(client, job["id"], "succeeded", timeout=60)
    assert ["acme"] == tenants
