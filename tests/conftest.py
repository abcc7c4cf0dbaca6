"""Fixtures: a real database per test on each backend, a real HTTP server, the app.

Backends: every test that takes `database_url` runs on SQLite and on PostgreSQL.
PostgreSQL comes from INGEST_TEST_POSTGRES_URL (default: the local server); its tests skip
when it is unreachable, unless INGEST_TEST_REQUIRE_POSTGRES is set (CI), where they fail.
Each run creates its own PostgreSQL database and drops it at the end; each test starts
from empty tables. SQLite tests each get a fresh file copied from a migrated template.
"""

import asyncio
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from fastapi import FastAPI

from app.api.app import create_app
from app.settings import Settings
from app.store.database import upgrade_to_head
from app.store.jobs import JobStore
from app.store.queue import Queue
from tests.support.stores import open_stores
from tests.support.webserver import ScriptedServer

PG_URL = os.environ.get("INGEST_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
REQUIRE_PG = bool(os.environ.get("INGEST_TEST_REQUIRE_POSTGRES"))


def _pg_admin_dsn(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`make test` spreads the tests over two pytest-xdist runners (`--dist loadgroup`); the
    ones that start many service processes (tests/chaos, the load test) all go to one, in
    turn, so two of them never crowd the two cores at once."""
    for item in items:
        if "chaos" in item.path.parts or item.path.name == "test_load.py":
            item.add_marker(pytest.mark.xdist_group("processes"))


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str | None]:
    """A database of this run's own on the PostgreSQL server, migrated; None if unreachable."""
    name = f"ingest_test_{uuid.uuid4().hex[:10]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(_pg_admin_dsn(PG_URL), timeout=5)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    try:
        asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        if REQUIRE_PG:
            pytest.fail(f"PostgreSQL required but unreachable at {PG_URL}: {exc}")
        yield None
        return
    url = PG_URL.rsplit("/", 1)[0] + f"/{name}"
    upgrade_to_head(url)
    yield url
    asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "ingest.db"
    upgrade_to_head(f"sqlite:///{path}")
    return path


async def _truncate(url: str) -> None:
    conn = await asyncpg.connect(_pg_admin_dsn(url))
    try:
        await conn.execute(
            "TRUNCATE attempts, jobs, job_counts, bytes_kept, domains, tenants, workers, crawls"
            " RESTART IDENTITY CASCADE"
        )
    finally:
        await conn.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_template: Path) -> str:
    """An empty, migrated database on each backend."""
    if request.param == "sqlite":
        path = tmp_path / "ingest.db"
        shutil.copy(sqlite_template, path)
        return f"sqlite:///{path}"
    url = request.getfixturevalue("pg_database")
    if url is None:
        pytest.skip(f"PostgreSQL unreachable at {PG_URL}")
    asyncio.run(_truncate(url))
    return url


@pytest.fixture
def pg_url(pg_database: str | None) -> str:
    """An empty, migrated database on PostgreSQL, for what only PostgreSQL has."""
    if pg_database is None:
        pytest.skip("PostgreSQL unreachable")  # fails instead with INGEST_TEST_REQUIRE_POSTGRES
    asyncio.run(_truncate(pg_database))
    return pg_database


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[JobStore, Queue]]:
    """A job store and the worker's queue on each backend, at a clock from
    `tests.support.stores.NOW`
    a millisecond later at each read: for the store's own tests (`tests.support.stores`)."""
    async with open_stores(database_url) as both:
        yield both


@pytest.fixture
def make_settings(database_url: str) -> Callable[..., Settings]:
    """Settings on the test database, with sub-second timings so no test waits for real."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "poll_interval_seconds": 0.2,
            "backoff_base_seconds": 0.2,
            "backoff_max_seconds": 1.0,
            "backoff_jitter": 0.0,
            # The product's defaults: a test box stalled for seconds (CI once held a process
            # past a 2 s read) must not turn a scripted answer into a timeout.
            "connect_timeout_seconds": 10.0,
            "read_timeout_seconds": 20.0,
            "fetch_timeout_seconds": 30.0,
            "lease_seconds": 5.0,
            "shutdown_grace_seconds": 1.0,
            "worker_concurrency": 8,
            "allow_private_networks": True,  # the test servers are on 127.0.0.1
            "allowed_hostnames": ("ingest",),  # the Host of `running_app`'s client
            # Extraction in the worker's thread: starting processes for every app would cost
            # seconds a test. The processes are tested in test_extraction_pool and
            # test_page_content, and every `ingest` process of the tests starts its own.
            "extract_processes": 0,
        }
        values.update(overrides)
        return Settings(_env_file=None, **values)

    return make


@pytest.fixture
def web() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@asynccontextmanager
async def running_app(settings: Settings) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app with its lifespan (migrations, worker) running, and a client for it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ingest") as client:
            yield app, client


@pytest.fixture
async def client(make_settings: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app with its worker disabled: for API tests."""
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        yield client


async def eventually(
    check: Callable[[], Awaitable[Any]], timeout: float = 10.0, interval: float = 0.05
) -> Any:
    """Poll `check` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s; last value {value!r}")
        await asyncio.sleep(interval)


async def submit(client: httpx.AsyncClient, url: str, **fields: Any) -> dict[str, Any]:
    """POST /jobs one job; its JSON (fails the test unless 201)."""
    response = await client.post("/jobs", json={"url": url, **fields})
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


async def wait_for_status(
    client: httpx.AsyncClient, job_id: str, *statuses: str, timeout: float = 10.0
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        job = (await client.get(f"/jobs/{job_id}")).json()
        return job if job["status"] in statuses else None

    return await eventually(check, timeout)
