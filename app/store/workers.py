"""The `workers` table: each worker process's row, written by the worker, read by operators.

A worker writes its row when it starts and on each heartbeat (`beat`: its load, the time),
and marks it stopped when it stops cleanly (`stop`); the row is kept, so an operator sees
that it stopped rather than vanished. A row whose heartbeat is older than the `silence`
a reader allows, and not stopped, is a worker that died or lost the database: `gone`.
Rows are deleted a day after their last heartbeat, when a worker starts (rows only pile
up as workers start, so that is often enough).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import sqlalchemy as sa

from app.clock import Clock
from app.model import WorkerPresence
from app.store.database import Database
from app.store.tables import workers

KEPT_FOR = timedelta(days=1)


def silence(lease_seconds: float) -> timedelta:
    """How long a worker may go unheard before it is shown as gone: two leases, six of its
    heartbeats (the API, the dashboard and the CLI all say so)."""
    return timedelta(seconds=2 * lease_seconds)


"""A worker's row is deleted this long after its last heartbeat."""


def beat(conn: sa.Connection, presence: WorkerPresence, now: datetime) -> None:
    """Write the worker's row as of `now`: updated if it is there, else inserted (at start,
    or once pruned), pruning rows silent for `KEPT_FOR`."""
    load = {"running": presence.running, "queued": presence.queued, "last_heartbeat_at": now}
    update = sa.update(workers).where(workers.c.id == presence.id).values(**load)
    if conn.execute(update).rowcount:
        return
    conn.execute(sa.delete(workers).where(workers.c.last_heartbeat_at < now - KEPT_FOR))
    conn.execute(
        sa.insert(workers).values(
            id=presence.id,
            host=presence.host,
            pid=presence.pid,
            version=presence.version,
            slots=presence.slots,
            started_at=presence.started_at,
            **load,
        )
    )


def stop(conn: sa.Connection, worker_id: str, now: datetime) -> None:
    """Mark the worker stopped at `now`, with nothing in flight."""
    conn.execute(
        sa.update(workers)
        .where(workers.c.id == worker_id)
        .values(running=0, queued=0, last_heartbeat_at=now, stopped_at=now)
    )


class WorkerState(StrEnum):
    LIVE = "live"
    """Its last heartbeat is recent."""
    STOPPED = "stopped"
    """It stopped cleanly."""
    GONE = "gone"
    """Silent too long without saying it stopped: it died, hangs or lost the database."""


@dataclass(frozen=True)
class WorkerSeen:
    id: str
    host: str
    pid: int
    version: str
    slots: int
    running: int
    queued: int
    started_at: datetime
    last_heartbeat_at: datetime
    stopped_at: datetime | None
    state: WorkerState


class WorkerStore:
    def __init__(self, database: Database, clock: Clock) -> None:
        self.db = database
        self.clock = clock

    async def list(self, now: datetime, silence: timedelta) -> list[WorkerSeen]:
        """Every worker's row, live ones first, then by host and start; one not heard of for
        `silence` (and not stopped) is gone."""
        stmt = sa.select(workers).order_by(workers.c.host, workers.c.started_at, workers.c.id)
        async with self.db.read() as conn:
            rows = (await conn.execute(stmt)).all()
        seen = [
            WorkerSeen(
                **row._mapping, state=_state(row.stopped_at, row.last_heartbeat_at, now - silence)
            )
            for row in rows
        ]
        order = list(WorkerState)
        return sorted(seen, key=lambda worker: order.index(worker.state))


def _state(
    stopped_at: datetime | None, last_heartbeat_at: datetime, heard_since: datetime
) -> WorkerState:
    if stopped_at is not None:
        return WorkerState.STOPPED
    return WorkerState.LIVE if last_heartbeat_at >= heard_since else WorkerState.GONE
