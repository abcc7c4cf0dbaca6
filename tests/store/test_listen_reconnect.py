"""PostgreSQL only (SQLite has no LISTEN): a LISTEN connection that drops is reopened, and
another process's submit wakes the worker again at once."""

import logging

import asyncpg

from app.settings import Settings
from tests.conftest import _pg_admin_dsn, eventually, running_app, wait_for_status

LISTENER = (
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
    "AND query ILIKE 'LISTEN%' AND pid <> pg_backend_pid()"
)


async def test_listen_comes_back_after_its_backend_is_terminated(pg_url, web, caplog):
    """The worker polls every 30 s: only LISTEN explains a pickup within seconds."""
    settings = Settings(
        _env_file=None,
        database_url=pg_url,
        poll_interval_seconds=30.0,
        lease_seconds=60.0,
        shutdown_grace_seconds=1.0,
        allow_private_networks=True,
        allowed_hostnames=("ingest",),  # the test client's Host
    )
    admin = await asyncpg.connect(_pg_admin_dsn(pg_url))
    try:
        with caplog.at_level(logging.INFO, logger="ingest.store"):
            async with running_app(settings) as (_, worker_client):
                listener = await eventually(lambda: admin.fetchval(LISTENER), timeout=20)
                await admin.execute("SELECT pg_terminate_backend($1)", listener)

                async def reopened() -> int | None:
                    pid = await admin.fetchval(LISTENER)
                    back = "LISTEN connection back" in caplog.text
                    return pid if back and pid not in (None, listener) else None

                await eventually(reopened, timeout=20)
                async with running_app(settings.model_copy(update={"worker_enabled": False})) as (
                    _,
                    other,
                ):
                    job = (await other.post("/jobs", json={"url": web.url("/page")})).json()
                await wait_for_status(worker_client, job["id"], "succeeded", timeout=10)
        lost = [r for r in caplog.records if "LISTEN connection lost" in r.getMessage()]
        back = [r for r in caplog.records if "LISTEN connection back" in r.getMessage()]
        assert (len(lost), len(back)) == (1, 1), caplog.text
    finally:
        await admin.close()
