"""The `workers` table on both backends: a worker's row from start to clean stop, its load
on heartbeats, gone after silence, pruned after a day; `GET /workers` and `ingest workers`."""

import asyncio
import json
import os
import socket
from datetime import UTC, datetime, timedelta

from typer.testing import CliRunner

import app
from app.cli import cli
from app.model import WorkerPresence
from app.settings import Settings
from app.store.database import Database
from app.store.workers import WorkerState, WorkerStore
from tests.conftest import eventually, running_app
from tests.support.stores import queue_on
from tests.support.webserver import Reply

NOW = datetime(2026, 11, 30, 3, 12, 4, tzinfo=UTC)
SILENCE = timedelta(seconds=10)


def presence(worker_id: str, started: datetime = NOW, running: int = 0) -> WorkerPresence:
    host, pid, _ = worker_id.split(":")
    return WorkerPresence(worker_id, host, int(pid), "0.1.0", 8, running, 0, started)


async def test_a_worker_is_listed_from_start_to_clean_stop(make_settings, web):
    """While the app's worker runs, GET /workers shows it live with its host, pid, version,
    slots and the job it runs (heartbeats carry the load); after a clean stop, stopped."""
    slow = web.script("/slow", Reply(200, delay=3))
    settings = make_settings(lease_seconds=0.6, worker_concurrency=3)
    async with running_app(settings) as (running, client):
        worker_id = running.state.runtime.worker.id

        async def listed_once() -> list[dict]:
            return (await client.get("/workers")).json()["items"]

        (listed,) = await eventually(listed_once)  # written as the worker task starts
        await client.post("/jobs", json={"url": slow})

        async def busy() -> dict | None:
            (row,) = (await client.get("/workers")).json()["items"]
            return row if row["running"] == 1 else None

        loaded = await eventually(busy)
    async with running_app(make_settings(worker_enabled=False)) as (_, client):
        (stopped,) = (await client.get("/workers")).json()["items"]
    assert {
        "id": worker_id,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "version": app.__version__,
        "state": "live",
        "slots": 3,
        "running": 0,
        "queued": 0,
        "stopped_at": None,
    } == {k: v for k, v in listed.items() if k not in ("started_at", "last_heartbeat_at")}
    assert (worker_id, "live") == (loaded["id"], loaded["state"])
    assert ("stopped", 0) == (stopped["state"], stopped["running"])
    assert stopped["stopped_at"] is not None


async def test_silent_workers_are_gone_and_old_rows_are_pruned(database_url):
    """A row not heard of for longer than the silence allowed is gone, unless it stopped;
    a worker's first beat deletes rows silent for a day."""
    database = Database(database_url)
    queue, workers = (
        queue_on(database, Settings(_env_file=None)),
        WorkerStore(database, lambda: NOW),
    )
    try:
        await queue.report(presence("old:1:aa", NOW - timedelta(days=2)), NOW - timedelta(days=2))
        await queue.report(presence("quiet:2:bb", running=3), NOW - timedelta(seconds=11))
        await queue.report(presence("done:3:cc"), NOW - timedelta(minutes=5))
        await queue.stopped("done:3:cc", NOW - timedelta(minutes=5))
        await queue.report(presence("busy:4:dd", running=2), NOW - timedelta(seconds=9))
        await queue.report(presence("busy:4:dd", running=5), NOW - timedelta(seconds=3))
        seen = await workers.list(NOW, SILENCE)
    finally:
        await database.dispose()
    assert [
        ("busy:4:dd", WorkerState.LIVE, 5),
        ("done:3:cc", WorkerState.STOPPED, 0),
        ("quiet:2:bb", WorkerState.GONE, 3),
    ] == [(w.id, w.state, w.running) for w in seen]


async def test_workers_are_for_admins(make_settings):
    """With API keys, GET /workers needs the admin key: 401 without one, 403 for a tenant's."""
    admin, shop = "admin-key-0123456789", "shop-key-0123456789"
    settings = make_settings(worker_enabled=False, api_keys=f"{admin}:*,{shop}:shop")
    async with running_app(settings) as (_, client):
        statuses = [
            (await client.get("/workers", headers=headers)).status_code
            for headers in [
                {},
                {"Authorization": f"Bearer {shop}"},
                {"Authorization": f"Bearer {admin}"},
            ]
        ]
    assert [401, 403, 200] == statuses


def test_ingest_workers_at_80_columns_and_as_json(database_url, monkeypatch, tmp_path):
    """`ingest workers` fits 80 columns, one line per worker with its state and load;
    --json prints each as GET /workers does."""
    now = datetime.now(UTC)
    long_id = "a-rather-long-host-name.internal.example:123456:0a1b2c3d"

    async def seed() -> None:
        database = Database(database_url)
        queue = queue_on(database, Settings(_env_file=None))
        try:
            await queue.report(presence(long_id, now - timedelta(hours=1), running=7), now)
            await queue.report(presence("gone:42:ffee0011", now), now - timedelta(hours=1))
        finally:
            await database.dispose()

    asyncio.run(seed())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    runner = CliRunner()
    table = runner.invoke(cli, ["workers"], env={"COLUMNS": "80"})
    as_json = runner.invoke(cli, ["workers", "--json"], env={"COLUMNS": "80"})
    assert (0, 0) == (table.exit_code, as_json.exit_code), table.output + as_json.output
    lines = table.stdout.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert lines[0].split()[:4] == ["WORKER", "STATE", "RUNNING", "QUEUED"]
    live = next(line for line in lines if "live" in line)
    assert live.startswith("a-rather-long-host-name.")
    assert " 7/8 " in live
    assert any(line.startswith("gone:42:ffee0011") and " gone " in line for line in lines)
    items = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(long_id, "live", 7), ("gone:42:ffee0011", "gone", 0)] == [
        (item["id"], item["state"], item["running"]) for item in items
    ]
