"""The worker's handle on the store: each method one transaction, the SQL in its own module.

- `claim`: due jobs become leases (`app.store.claim`, where a job is claimed); waiting jobs
  that came due are moved among the ready ones first.
- `extend_leases`, `record`, `pause_domain`, `crawl_delay`: the heartbeat, the outcomes as
  policy settled them, a domain's pause, the Crawl-delay of its robots.txt
  (`app.store.record`).
- `overdue`, `next_due_at`, `prune`, `prune_domains`: what the worker reads to take back
  leases, to know whether scheduled refreshes came due and how long it may sleep, and
  retention (`app.store.retention`).
- `stage_refreshes`: scheduled refreshes that came due go back to pending
  (`app.store.refreshes`).
- `report`, `stopped`: the worker's own row in the `workers` table (`app.store.workers`).
- `fold_counts`, `bytes_kept`: the counts kept by triggers, folded; the bytes tenants keep,
  which the completer holds new versions to (`app.store.counts`).

Every write of a running attempt is fenced on its claim's random `lease_id` (cleared when
the job leaves running), so the late write of an attempt whose lease was taken back
changes nothing, even after the same worker claimed the job again under the same attempt
number (an operator's retry resets the count). The worker issues no SQL of its own.
"""

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from app.model import DomainPause, JobStatus, Lease, Outcome, WorkerPresence
from app.rules.scheduling import ShareRules
from app.store import claim, counts, record, refreshes, workers
from app.store.database import Database
from app.store.retention import prune_domains, prune_jobs
from app.store.tables import domains, jobs, status_is

STAGING_INTERVAL = timedelta(seconds=1)
"""How often a worker that claims without looking first (draining) moves waiting jobs that
came due among the ready ones: Oban's stager runs every second too."""


@dataclass(frozen=True)
class Overdue:
    """What a worker's look back found (`Queue.overdue`)."""

    expired: list[Lease]
    """Leases that ran out, to take back."""
    refreshes_due: bool
    """A scheduled refresh came due: `stage_refreshes` has work."""


class Queue:
    def __init__(self, database: Database, shares: ShareRules, records: record.RecordRules) -> None:
        """`shares`: the claim's rules (`app.rules.scheduling`); `records`: what a record keeps
        and owes (`app.store.record`)."""
        self.db = database
        self.shares = shares
        self.records = records
        self._domains_after = ""
        """Where the next `prune_domains` goes on in the domains table, by name."""
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
        write transaction takes one (SQLite: `Backend.look_before_claiming`).

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

    async def overdue(self, now: datetime, limit: int = 500) -> Overdue:
        """What is overdue at `now`, in one read: running jobs whose lease ran out (their
        worker died or hung), as the leases their workers held (recording an outcome for
        one is fenced like any other), and whether a scheduled refresh has come due."""
        stmt = (
            sa.select(
                jobs.c.id,
                jobs.c.url,
                jobs.c.domain,
                jobs.c.tenant,
                jobs.c.attempts,
                jobs.c.max_attempts,
                jobs.c.deferrals,
                jobs.c.worker_id,
                sa.func.coalesce(jobs.c.lease_id, ""),  # none before migration 0005
                jobs.c.started_at,
            )
            .where(status_is(JobStatus.RUNNING), jobs.c.lease_expires_at < now)
            .order_by(jobs.c.lease_expires_at)
            .limit(limit)
        )
        async with self.db.read() as conn:
            leases = [Lease(*row) for row in await conn.execute(stmt)]
            refreshes_due = await conn.run_sync(refreshes.any_due, now)
        return Overdue(leases, refreshes_due)

    async def stage_refreshes(self, now: datetime) -> int:
        """Move the succeeded jobs whose scheduled refresh is due back to pending (a batch);
        how many moved (`overdue` says whether any is due: most passes find none, and on
        SQLite a write transaction takes the one writer)."""
        backend = self.db.backend
        return await self.db.transact(lambda conn: refreshes.stage_due(conn, backend, now))

    async def fold_counts(self) -> int:
        """Fold the changes to the job counts and bytes kept GET /stats reads, once they pile
        up (`app.store.counts`); how many rows were folded."""
        return await counts.fold(self.db)

    async def bytes_kept(self, tenants: Sequence[str]) -> dict[str, int]:
        """The bytes of content each of `tenants` keeps (none named: none kept), read
        without the write lock, for its storage quota (`app.rules.policy.within_storage_quota`)."""
        return await counts.bytes_kept_by(self.db, tenants)

    async def prune(self, older_than: datetime) -> int:
        """Retention: delete succeeded and cancelled jobs (with their attempts and content)
        that finished before `older_than` (`app.store.retention`); how many went."""
        return await prune_jobs(self.db, older_than)

    async def prune_domains(self, now: datetime) -> int:
        """Retention: delete the rows of domains that no job names and that hold no state at
        `now`, in the next slice of the table (`app.store.retention`); how many went."""
        deleted, self._domains_after = await prune_domains(self.db, now, self._domains_after)
        return deleted

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
