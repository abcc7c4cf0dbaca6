"""Fifty thousand jobs as `bench.ten_million` fills ten million (a tenth pending, over
1,000 domains and 100 tenants, the rest finished with attempts and content): the claim, the
dead list's first and deep pages and stats read the jobs through indexes, never the whole
table, and the claim's tenants' turn asks only as many tenants as it needs whether they have
a job claimable (PostgreSQL's plans, after ANALYZE). No time is asserted: `make
bench-ten-million` measures them."""

import re
import uuid

import pytest

from app.clock import utc_now
from app.model import JobStatus
from app.settings import Settings
from app.store.database import Database
from app.store.jobs import JobStore
from bench.claim import claim_plans
from bench.harness import drop_database, fresh_database
from bench.ten_million import Shape, dead_cursor, fill
from tests.support.stores import queue_on


@pytest.mark.timeout(120)
async def test_the_reads_of_a_big_queue_go_through_indexes(pg_url):
    name = f"ingest_test_plans_{uuid.uuid4().hex[:8]}"
    database = Database(await fresh_database("postgresql", name))
    try:
        await fill(database, Shape(50_000, 1000, 100, 0.05))
        store = JobStore(database, utc_now)
        queue = queue_on(database, Settings(_env_file=None))
        deep = await dead_cursor(database, 1500)
        plans = {
            "claim": await claim_plans(database, lambda: queue.claim("w", 32, utc_now(), 60)),
            "dead, first page": await claim_plans(
                database, lambda: store.list([JobStatus.DEAD], limit=50)
            ),
            "dead, deep page": await claim_plans(
                database, lambda: store.list([JobStatus.DEAD], limit=50, cursor=deep)
            ),
            "stats": await claim_plans(database, store.stats),
            "stats of a tenant": await claim_plans(database, lambda: store.stats("t0")),
        }
    finally:
        await database.dispose()
        await drop_database("postgresql", name)
    assert len(plans["claim"][1]) == 32
    for what, (plan, _) in plans.items():
        assert "on jobs" in plan, (what, plan)
        assert "Seq Scan on jobs" not in plan, (what, plan)
    for page in ("dead, first page", "dead, deep page"):
        assert "Index Scan Backward using ix_jobs_dead_created" in plans[page][0]
    parts = plans["claim"][0].split("\n-- ")
    walk = next(part for part in parts if ".next_pass, " in part.partition("\n")[0])
    asked = re.search(r"ix_jobs_tenant_claim on jobs.*loops=(\d+)", walk)
    assert asked is not None, walk
    # 100 tenants with jobs: a claim of 32 serves at most 32, so it asks 32 of them (a
    # few more if one's first jobs wait on a busy domain), not all 100.
    assert int(asked.group(1)) < 50, walk
