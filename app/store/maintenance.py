"""The maintenance service's handle on the store: the house's chores, each one transaction or
read, their SQL in its own module.

- `overdue`: the leases that ran out (their worker died or hung), to take back, and whether
  a scheduled refresh came due, in one read.
- `stage_refreshes`: scheduled refreshes that came due go back to pending
  (`app.store.refreshes`).
- `prune`, `prune_domains`: retention (`app.store.retention`).
- `fold_counts`: the changes to the job counts and bytes kept, folded (`app.store.counts`).

The service (`app.worker.maintenance`) decides when each runs; the worker's own port is
`app.store.queue`. Taking back a lease records its outcome through the worker's `Queue`,
fenced like any other.
"""

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa

from app.model import JobStatus, Lease
from app.store import counts, refreshes
from app.store.database import Database
from app.store.retention import prune_domains, prune_jobs
from app.store.tables import jobs, status_is


@dataclass(frozen=True)
class Overdue:
    """What a look back found (`MaintenanceStore.overdue`)."""

    expired: list[Lease]
    """Leases that ran out, to take back."""
    refreshes_due: bool
    """A scheduled refresh came due: `stage_refreshes` has work."""


class MaintenanceStore:
    def __init__(self, database: Database) -> None:
        self.db = database
        self._domains_after = ""
        """Where the next `prune_domains` goes on in the domains table, by name."""

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

    async def prune(self, older_than: datetime) -> int:
        """Retention: delete succeeded and cancelled jobs (with their attempts and content)
        that finished before `older_than` (`app.store.retention`); how many went."""
        return await prune_jobs(self.db, older_than)

    async def prune_domains(self, now: datetime) -> int:
        """Retention: delete the rows of domains that no job names and that hold no state at
        `now`, in the next slice of the table (`app.store.retention`); how many went."""
        deleted, self._domains_after = await prune_domains(self.db, now, self._domains_after)
        return deleted
