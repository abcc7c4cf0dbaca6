"""The maintenance service: the house's chores, on a loop of their own beside the worker.

Each chore runs on its own interval (River's maintenance services, Oban's plugins):
- take back the expired leases of dead or hung workers, as policy settles them, recorded
  through the worker's completer; then stage the scheduled refreshes that came due
  (`MaintenanceRules.take_back_seconds`);
- retention: delete finished jobs past INGEST_RETENTION_DAYS, then unused domain rows
  (`PRUNE_INTERVAL`; never with 0 days);
- fold the changes to the job counts (`FOLD_INTERVAL`).

Nothing runs while the worker's completer cannot record: the database cannot serve, and a
take-back is recorded through that completer. A chore that raises fails the tick, which the
loop logs and tries again (`app.worker.loop`). It issues no SQL (`app.store.maintenance`)
and claims nothing; the composition root (`app.runtime`) runs one beside each worker.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.rules import policy
from app.store.maintenance import MaintenanceStore
from app.text.wording import counted
from app.worker.completer import Completer
from app.worker.loop import Held, Loop

log = logging.getLogger("ingest.worker")

PRUNE_INTERVAL = timedelta(minutes=5)
"""How often finished jobs past INGEST_RETENTION_DAYS are deleted."""

FOLD_INTERVAL = timedelta(seconds=5)
"""How often the changes to the job counts (`app.store.counts`) are folded: GET /stats sums
those not folded yet (what they cost it: docs/design/worker.md). A fold of fewer than
`FOLD_AT` rows is skipped after a count."""


@dataclass(frozen=True, slots=True)
class MaintenanceRules:
    """The chores' timings, built once from the settings by the composition root."""

    lease_seconds: float
    poll_interval_seconds: float
    retention_days: float
    """0: nothing is pruned."""

    @property
    def take_back_seconds(self) -> float:
        """How often expired leases are looked for: every poll, at most half a lease."""
        return min(self.poll_interval_seconds, self.lease_seconds / 2)


class Maintenance:
    def __init__(
        self,
        store: MaintenanceStore,
        rules: MaintenanceRules,
        completer: Completer,
        clock: Callable[[], datetime],
        worker_id: str,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        """`completer`: the worker's, which records the leases taken back; `worker_id`: the
        worker this runs beside, which its log lines name; `wake`: tells the worker that
        refreshes were staged."""
        self.store = store
        self.rules = rules
        self.completer = completer
        self.clock = clock
        self.worker_id = worker_id
        self.wake = wake
        self.loop = Loop(f"maintenance {worker_id}", self.tick, log, reports=False)
        self._next_take_back = clock()
        self._next_prune = clock() + PRUNE_INTERVAL
        self._next_fold = clock() + FOLD_INTERVAL

    async def run(self) -> None:
        await self.loop.run()

    def stop(self) -> None:
        """Finish the chore under way, then return from `run`."""
        self.loop.stop()

    async def tick(self) -> float | Held:
        """One pass: each chore that is due. Returns how long the loop may wait: until the
        next chore is due."""
        if self.completer.failing:
            return Held(self.rules.take_back_seconds)
        now = self.clock()
        if now >= self._next_take_back:
            self._next_take_back = now + timedelta(seconds=self.rules.take_back_seconds)
            await self._look_back(now)
        if self.rules.retention_days and now >= self._next_prune:
            self._next_prune = now + PRUNE_INTERVAL
            await self._prune(now)
        if now >= self._next_fold:
            self._next_fold = now + FOLD_INTERVAL
            await self.store.fold_counts()
        due = [self._next_take_back, self._next_fold]
        if self.rules.retention_days:
            due.append(self._next_prune)
        return max((min(due) - self.clock()).total_seconds(), 0.0)

    async def _look_back(self, now: datetime) -> None:
        """Record the expired leases of other (dead or hung) workers as policy settles them,
        and put the scheduled refreshes that came due back to pending, for the worker's next
        claim or another's (`app.store.refreshes`)."""
        overdue = await self.store.overdue(now)
        if expired := [policy.expired(lease, now) for lease in overdue.expired]:
            await self.completer.record(expired)
        if overdue.refreshes_due and (staged := await self.store.stage_refreshes(now)):
            log.info(
                "worker %s: %s due for a scheduled refresh, pending again",
                self.worker_id,
                counted(staged, "job"),
            )
            self.wake()

    async def _prune(self, now: datetime) -> None:
        """Retention: delete succeeded and cancelled jobs (and their content) that finished
        more than INGEST_RETENTION_DAYS ago, then the rows of domains no job names any more.
        Dead jobs stay."""
        deleted = await self.store.prune(now - timedelta(days=self.rules.retention_days))
        if deleted:
            log.info(
                "worker %s: deleted %s (retention)",
                self.worker_id,
                counted(deleted, "finished job"),
            )
        unused = await self.store.prune_domains(now)
        if unused:
            log.info(
                "worker %s: deleted %s (retention)",
                self.worker_id,
                counted(unused, "unused domain row"),
            )
