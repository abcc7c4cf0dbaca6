"""Stored content: written with the success, removed by retention, on both backends."""

from datetime import UTC, datetime, timedelta
from typing import Any

from app.part_settings import PartSettings
from app.store.maintenance import MaintenanceStore, Overdue
from app.store.record import Recorded
from app.worker.completer import Completer
from app.worker.maintenance import PRUNE_INTERVAL, Maintenance
from tests.conftest import running_app, wait_for_status
from tests.support.stores import queue_on
from tests.support.webserver import Reply


async def test_retention_removes_content_with_its_job(make_settings, web):
    """Content is served until retention deletes its job, then both answer 404."""
    body = "<title>Kept</title><p>Ünïcode text</p>".encode()
    url = web.script("/page", Reply(200, body))
    async with running_app(make_settings()) as (app, client):
        job = await wait_for_status(
            client, (await client.post("/jobs", json={"url": url})).json()["id"], "succeeded"
        )
        queue = queue_on(app.state.runtime.database, app.state.runtime.settings)
        finished = datetime.fromisoformat(job["finished_at"])
        kept = await MaintenanceStore(queue.db).prune(finished - timedelta(seconds=1))
        before = await client.get(f"/jobs/{job['id']}/content")
        pruned = await MaintenanceStore(queue.db).prune(finished + timedelta(seconds=1))
        after = await client.get(f"/jobs/{job['id']}/text")
        gone = await client.get(f"/jobs/{job['id']}")
    assert (0, 200, body) == (kept, before.status_code, before.content)
    assert (1, 404, 404) == (pruned, after.status_code, gone.status_code)
    assert f"no job {job['id']}" == after.json()["detail"]


async def test_a_content_type_outside_latin1_is_served_back(make_settings, web):
    """A page served as `text/plain; x=€` (UTF-8 in the header) or with an ESC in its
    Content-Type is stored with that header as printable ASCII: GET /jobs/{id}/content, the
    dashboard's job page and its content view all answer 200 with it."""
    euro = web.script("/euro", Reply(200, b"cost", "text/plain; x=€".encode()))
    esc = web.script("/esc", Reply(200, b"bold", "text/plain; x=\x1b[1m"))
    async with running_app(make_settings()) as (_, client):
        answers = []
        for url in (euro, esc):
            job = (await client.post("/jobs", json={"url": url})).json()
            done = await wait_for_status(client, job["id"], "succeeded")
            content = await client.get(f"/jobs/{job['id']}/content")
            page = await client.get(f"/dashboard/jobs/{job['id']}")
            shown = await client.get(f"/dashboard/jobs/{job['id']}/content")
            answers.append(
                (
                    done["result"]["content_type"],
                    content.status_code,
                    content.headers["content-type"],
                    page.status_code,
                    shown.status_code,
                )
            )
    assert [
        ("text/plain; x=%E2%82%AC", 200, "text/plain; x=%E2%82%AC", 200, 200),
        ("text/plain; x=[1m", 200, "text/plain; x=[1m", 200, 200),
    ] == answers


class PruningQueue:
    """A queue with nothing to claim or take back, which counts the prunes asked of it."""

    def __init__(self) -> None:
        self.cutoffs: list[datetime] = []
        self.domain_prunes: list[datetime] = []

    async def prune(self, older_than: datetime) -> int:
        self.cutoffs.append(older_than)
        return 3

    async def prune_domains(self, now: datetime) -> int:
        self.domain_prunes.append(now)
        return 2

    async def overdue(self, now: datetime) -> Overdue:
        return Overdue([], refreshes_due=False)

    async def record(self, outcomes, now):
        return Recorded([], {})

    async def claim(self, worker_id, limit, now, lease_seconds, look_first=True) -> list:
        return []

    async def next_due_at(self, now: datetime) -> None:
        return None

    async def fold_counts(self) -> int:
        return 0


def pruning_maintenance(queue: PruningQueue, settings, clock) -> Maintenance:
    """The maintenance service on `queue` (as its store and its completer's queue), with the
    views the composition root makes of `settings`."""
    views = PartSettings.of(settings)
    port: Any = queue
    completer = Completer(port, views.batching, views.retry, clock)
    return Maintenance(port, views.maintenance, completer, clock, "w")


async def test_worker_prunes_at_the_retention_age(make_settings):
    """Every PRUNE_INTERVAL, a tick asks for jobs finished before now - retention days,
    then for the rows of domains unused now."""
    now = datetime(2026, 11, 30, tzinfo=UTC)
    clock = [now]
    queue = PruningQueue()
    maintenance = pruning_maintenance(queue, make_settings(retention_days=7), lambda: clock[0])

    await maintenance.tick()  # just started: not yet
    clock[0] = now + PRUNE_INTERVAL
    await maintenance.tick()
    await maintenance.tick()  # within the next interval: nothing

    assert [now + PRUNE_INTERVAL - timedelta(days=7)] == queue.cutoffs
    assert [now + PRUNE_INTERVAL] == queue.domain_prunes


async def test_zero_retention_keeps_content_forever(make_settings):
    """INGEST_RETENTION_DAYS=0 never prunes."""
    now = datetime(2026, 11, 30, tzinfo=UTC)
    clock = [now]
    queue = PruningQueue()
    maintenance = pruning_maintenance(queue, make_settings(retention_days=0), lambda: clock[0])

    for step in range(3):
        clock[0] = now + step * PRUNE_INTERVAL
        await maintenance.tick()

    assert ([], []) == (queue.cutoffs, queue.domain_prunes)
