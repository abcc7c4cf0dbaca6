"""Webhook deliveries in the store: owe one, claim due ones, record how a POST went.

A delivery is owed (`owe`) in the caller's transaction, the one that makes the job
succeeded or dead, so a finished job and its callback are committed together. The claim
follows the jobs' pattern: look first without the write lock, then one UPDATE ... RETURNING
over a materialized CTE of due rows, skipping rows another claim holds (`app.store.dialect`).
Every write after the claim is guarded on the attempt number, so a sender whose lease
lapsed changes nothing.
The sender (`app.worker.webhooks`) issues no SQL of its own.
"""

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from app.model import ClaimedDelivery, DeliveryStatus, Failure
from app.store.database import Database
from app.store.dialect import lock_skipping, materialized
from app.store.tables import Delivery, UTCDateTime, deliveries, jobs

PENDING, DELIVERED, DEAD = (s.value for s in DeliveryStatus)


def owe(
    conn: sa.Connection, job_ids: Sequence[str], event: str, now: datetime, max_attempts: int
) -> None:
    """In the caller's transaction: a pending delivery for each of `job_ids` that has a
    `callback_url` (the others get none)."""
    if not job_ids:
        return
    rows = sa.select(
        jobs.c.id,
        sa.literal(event, sa.String),
        jobs.c.callback_url,
        sa.literal(PENDING, sa.String),
        sa.literal(0, sa.Integer),
        sa.literal(max_attempts, sa.Integer),
        sa.literal(now, UTCDateTime),
        sa.literal(now, UTCDateTime),
    ).where(jobs.c.id.in_(list(job_ids)), jobs.c.callback_url.is_not(None))
    names = ["job_id", "event", "url", "status", "attempts", "max_attempts"]
    conn.execute(sa.insert(deliveries).from_select([*names, "created_at", "updated_at"], rows))


def owe_crawl(
    conn: sa.Connection, crawl_id: str, url: str, event: str, now: datetime, max_attempts: int
) -> None:
    """In the caller's transaction (the one that ends a crawl's round): a pending delivery
    of `event` for the crawl, to `url`."""
    conn.execute(
        sa.insert(deliveries).values(
            crawl_id=crawl_id,
            event=event,
            url=url,
            status=PENDING,
            attempts=0,
            max_attempts=max_attempts,
            created_at=now,
            updated_at=now,
        )
    )


def _due(now: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(
        deliveries.c.status == sa.literal_column(f"'{PENDING}'"),  # matches the partial index
        sa.or_(deliveries.c.retry_after.is_(None), deliveries.c.retry_after <= now),
        sa.or_(deliveries.c.lease_expires_at.is_(None), deliveries.c.lease_expires_at < now),
    )


class DeliveryStore:
    def __init__(self, database: Database) -> None:
        self.db = database

    async def claim(self, limit: int, now: datetime, lease_seconds: float) -> list[ClaimedDelivery]:
        """Atomically lease up to `limit` due deliveries, counting the attempt.

        A delivery whose sender died on its last attempt is dead here instead."""
        async with self.db.read() as conn:  # no write lock just to look, as in the jobs' claim
            if (
                await conn.execute(sa.select(deliveries.c.id).where(_due(now)).limit(1))
            ).first() is None:
                return []
        exhausted = deliveries.c.attempts >= deliveries.c.max_attempts
        due = materialized(
            lock_skipping(
                sa.select(deliveries.c.id)
                .where(_due(now), ~exhausted)
                .order_by(sa.func.coalesce(deliveries.c.retry_after, deliveries.c.created_at))
                .limit(limit)
            ).cte("due")
        )
        claim = (
            sa.update(deliveries)
            .where(deliveries.c.id == due.c.id, _due(now))
            .values(
                attempts=deliveries.c.attempts + 1,
                lease_expires_at=now + timedelta(seconds=lease_seconds),
                updated_at=now,
            )
            .returning(
                deliveries.c.id,
                deliveries.c.job_id,
                deliveries.c.event,
                deliveries.c.url,
                deliveries.c.attempts,
                deliveries.c.max_attempts,
                deliveries.c.crawl_id,
            )
        )
        lost = (
            sa.update(deliveries)
            .where(_due(now), exhausted)
            .values(status=DEAD, lease_expires_at=None, updated_at=now)
        )

        def work(conn: sa.Connection) -> list[Any]:
            conn.execute(lost)
            return list(conn.execute(claim))

        rows = await self.db.transact(work)
        return [ClaimedDelivery(*row) for row in rows]

    async def delivered(self, claimed: ClaimedDelivery, now: datetime) -> bool:
        """The POST was answered 2xx. False if the lease was lost (nothing changed)."""
        values = {"status": DELIVERED, "delivered_at": now, "retry_after": None}
        return await self._finish(claimed, now, values)

    async def failed(
        self, claimed: ClaimedDelivery, failure: Failure, now: datetime, retry_at: datetime | None
    ) -> bool:
        """The POST failed: pending again until `retry_at`, or dead when that is None."""
        values: dict[str, Any] = {
            "status": PENDING if retry_at else DEAD,
            "retry_after": retry_at,
            "last_error_kind": failure.kind.value,
            "last_error_type": failure.type,
            "last_error_message": failure.message,
            "last_error_http_status": failure.http_status,
            "last_error_at": now,
        }
        return await self._finish(claimed, now, values)

    async def _finish(
        self, claimed: ClaimedDelivery, now: datetime, values: dict[str, Any]
    ) -> bool:
        stmt = (
            sa.update(deliveries)
            .where(
                deliveries.c.id == claimed.id,
                deliveries.c.status == PENDING,
                deliveries.c.attempts == claimed.attempt,
            )
            .values(lease_expires_at=None, updated_at=now, **values)
        )
        return await self.db.transact(lambda conn: conn.execute(stmt).rowcount == 1)

    async def for_job(self, job_id: str) -> list[Delivery]:
        """A job's deliveries, oldest first."""
        stmt = sa.select(deliveries).where(deliveries.c.job_id == job_id).order_by(deliveries.c.id)
        async with self.db.read() as conn:
            return [Delivery(**row._mapping) for row in await conn.execute(stmt)]

    async def next_due_at(self) -> datetime | None:
        """The earliest time a pending delivery becomes due (its retry or its lease's end)."""
        pending = deliveries.c.status == sa.literal_column(f"'{PENDING}'")
        when = sa.func.coalesce(
            deliveries.c.lease_expires_at, deliveries.c.retry_after, deliveries.c.created_at
        )
        async with self.db.read() as conn:
            return (await conn.execute(sa.select(sa.func.min(when)).where(pending))).scalar()
