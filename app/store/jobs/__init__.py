"""The operators' side of the store: submit, read, list, search, retry, cancel, delete, count.

`JobStore` is the one handle the HTTP API, the dashboard and the CLI use, so all see and
change jobs the same way. It is composed of three layers: `reads.JobReads` (never changes a
row), `submits.JobSubmits` (new jobs, or the jobs that answer them) and
`commands.JobCommands` (the verbs, guarded on the status they expect). What they refuse
with is in `errors`, the page cursor in `cursor`, a job's row in `rows`, the shared parts
of their statements in `queries`. The worker's side (claim, record) is not here:
`app.store.queue`.
"""

from collections.abc import Callable
from datetime import datetime

from app.store.database import Database
from app.store.jobs.commands import JobCommands


class JobStore(JobCommands):
    """Jobs as operators see and change them: `JobReads`' reads and `JobCommands`' verbs."""

    def __init__(
        self,
        database: Database,
        clock: Callable[[], datetime],
        on_submit: Callable[[int | None], None] = lambda _: None,
        domain_max_in_flight: int | None = None,
        *,
        max_pending: int = 0,
        tenant_max_in_flight: int = 0,
    ) -> None:
        self.db = database
        self.clock = clock
        self.on_submit = on_submit
        """Called after new work is committed: wakes the worker in this process, with the
        highest priority submitted (None when the work is not new jobs: a requeue)."""
        self.domain_max_in_flight = domain_max_in_flight
        """INGEST_DOMAIN_MAX_IN_FLIGHT, to say when a job waits for its domain's fetches to
        end; None: not said."""
        self.max_pending = max_pending
        """INGEST_TENANT_MAX_PENDING (0: none): `submit` refuses what would pass it."""
        self.tenant_max_in_flight = tenant_max_in_flight
        """INGEST_TENANT_MAX_IN_FLIGHT (0: none), to say when a job waits for its tenant's
        jobs to end."""
