"""The worker's handle on the store (its port): each method one transaction, the SQL in its
own module.

- `claim`: due jobs become leases (`app.store.claim`); waiting jobs that came due first.
- `extend_leases`, `record`, `pause_domain`, `crawl_delay`: the heartbeat, the outcomes as
  policy settled them, a domain's pause, a robots.txt's Crawl-delay (`app.store.record`).
- `bytes_kept` (the completer's storage quota, `app.store.counts`); `next_due_at` (how long
  an idle worker may sleep); `report`, `stopped` (its row, `app.store.workers`).

The house's chores are not here but in `app.store.maintenance`. Every write of a running
attempt is fenced on its claim's random `lease_id` (cleared when the job leaves running),
so the late write of an attempt whose lease was taken back changes nothing, even after the
same worker claimed the job again under the same attempt number (an operator's retry
resets the count).
"""

from collections.abc import Collection, Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.model import DomainPause, JobStatus, Lease, Outcome, WorkerPresence
from app.rules.scheduling import ShareRules
from app.store import claim, counts, record, workers
from app.store.database import Database
from app.store.tables import domains, jobs, status_is

STAGING_INTERVAL = timedelta(seconds=1)
"""How often a worker that claims without looking first (draining) moves waiting jobs that
came due among the ready ones: Oban's stager runs every second too."""


class Queue:
    def __init__(self, database: Database, shares: ShareRules, records: record.RecordRules) -> None:
        """`shares`: the claim's rules (`app.rules.scheduling`); `records`: what a record keeps
        and owes (`app.store.record`)."""
        self.db = database
        self.shares = shares
        self.records = records
        self._next_staging = datetime.min.replace(tzinfo=UTC)
        """A claim that need not look first moves waiting jobs that came due in (step 0 of
        `app.store.claim`) only from then on: at most once per `STAGING_INTERVAL`."""

    async def claim(
        self,
        worker_id: str,
        limit: int,
        now: datetime,
        lease_seconds: float,
        look_first: bool = True,
    ) -> list[Lease]:
        """Atomically take up to `limit` claimable jobs (the rules: `app.store.claim`);
        `look_first` reads whether any is claimable before taking the write lock, where a
        write transaction takes one (SQLite: `backend.claim.worth_claiming`).

        A claim that looks first also moves in the waiting jobs that came due; one right
        after a full claim or a submit (draining: there surely is work) does so once per
        `STAGING_INTERVAL`, which spares a drain a statement per claim and delays a retry
        that came due meanwhile by that much at most."""
        stage = look_first or now >= self._next_staging
        if stage:
            self._next_staging = now + STAGING_INTERVAL
        return await claim.claim(
            self.db, worker_id, limit, now, lease_seconds, self.shares, look_first, stage
        )

    async def extend_leases(self, leases: Collection[Lease], until: datetime) -> set[Lease]:
        """Heartbeat: push out those of `leases` that are still held; returns them."""
        if not leases:
            return set()
        held = list(leases)
        return await self.db.transact(lambda conn: record.extend_leases(conn, held, until))

    async def record(self, outcomes: Sequence[Outcome], now: datetime) -> record.Recorded:
        """Record finished attempts, as given, in one transaction (`app.store.record`)."""
        if not outcomes:
            return record.Recorded([], {})
        max_attempts = self.records.webhook_max_attempts
        # Compiled and bound here, before the writer is taken (`record.Recording`).
        recording = record.Recording(self.db.backend, outcomes, now, self.records.content_versions)
        return await self.db.transact(lambda conn: record.record(conn, recording, max_attempts))

    async def pause_domain(self, domain: str, pause: DomainPause) -> bool:
        """Pause `domain` unless it is paused longer already; True if this pause is stored."""
        return await self.db.transact(lambda conn: record.pause_domain(conn, domain, pause))

    async def crawl_delay(
        self, domain: str, delay: float | None, not_before: datetime | None
    ) -> None:
        """Keep the Crawl-delay read of `domain`'s robots.txt (`record.crawl_delay`)."""
        await self.db.transact(lambda conn: record.crawl_delay(conn, domain, delay, not_before))

    async def bytes_kept(self, tenants: Sequence[str]) -> dict[str, int]:
        """The bytes of content each of `tenants` keeps (none named: none kept), read
        without the write lock, for its storage quota (`app.rules.policy.within_storage_quota`)."""
        return await counts.bytes_kept_by(self.db, tenants)

    async def next_due_at(self, now: datetime) -> datetime | None:
        """When something may next become claimable: the earliest `retry_after` of a waiting
        job, or the end of a domain's pause or interval. An idle worker waits until then."""
        retry = sa.select(sa.func.min(jobs.c.retry_after)).where(
            status_is(JobStatus.PENDING), jobs.c.retry_after.is_not(None)
        )
        pause = sa.select(sa.func.min(domains.c.paused_until)).where(domains.c.paused_until > now)
        interval = sa.select(sa.func.min(domains.c.next_start_at)).where(
            domains.c.next_start_at > now
        )
        async with self.db.read() as conn:
            times = [(await conn.execute(q)).scalar() for q in (retry, pause, interval)]
        return min((t for t in times if t is not None), default=None)

    async def report(self, presence: WorkerPresence, now: datetime) -> None:
        """Write the worker's row: it is alive at `now`, with this load."""
        await self.db.transact(lambda conn: workers.beat(conn, presence, now))

    async def stopped(self, worker_id: str, now: datetime) -> None:
        """Mark the worker's row stopped (a clean stop)."""
        await self.db.transact(lambda conn: workers.stop(conn, worker_id, now))
