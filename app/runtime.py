"""The running service, built in one place: the only composition root.

`Runtime.build(settings)` makes the database and the stores and, when the process runs a
worker, the fetcher, the job worker and the webhook sender, each handed what it needs at
construction (nothing is patched in afterwards). `start()` sets them going: LISTEN for
other processes' submits, the worker, the sender; `stop()` stops them in reverse and lets
the in-flight jobs finish or hands them back. The FastAPI lifespan (`app.api.app`) and
`ingest worker` (`app.cli`) both run a `Runtime`, so both run the same system.
"""

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from app import observability
from app.clock import Clock, utc_now
from app.fetch.fetcher import Fetcher
from app.fetch.guard import Resolver, system_resolver
from app.loop import Wakeup
from app.metrics import Metrics
from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.queue import Queue
from app.store.reads import ContentStore
from app.store.workers import WorkerStore
from app.webhooks import Deliverer
from app.worker import Worker

log = logging.getLogger("ingest.runtime")


@dataclass
class Runtime:
    settings: Settings
    clock: Clock
    database: Database
    jobs: JobStore
    domains: DomainStore
    deliveries: DeliveryStore
    contents: ContentStore
    workers: WorkerStore
    fetcher: Fetcher | None = None
    worker: Worker | None = None
    deliverer: Deliverer | None = None
    _running: list[asyncio.Task[None]] = field(default_factory=list)
    _listening: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        run_worker: bool,
        clock: Clock = utc_now,
        resolver: Resolver = system_resolver,
    ) -> "Runtime":
        """The system for `settings`; with `run_worker`, a job worker and a webhook sender.
        `clock` and `resolver` (the SSRF guard's DNS) are there for tests to replace."""
        database = Database(settings.database_url, settings.database_pool_size)
        # A submit in this process wakes this process's worker at once.
        wakeup = Wakeup()
        jobs = JobStore(database, clock, wakeup.set, settings.domain_max_in_flight)
        deliveries = DeliveryStore(database)
        runtime = cls(
            settings,
            clock,
            database,
            jobs,
            DomainStore(database, clock),
            deliveries,
            ContentStore(database),
            WorkerStore(database, clock),
        )
        if run_worker:
            runtime.fetcher = Fetcher(settings, resolver=resolver)
            queue = Queue(database, settings)
            runtime.worker = Worker(queue, runtime.fetcher, settings, clock, wakeup=wakeup)
            runtime.deliverer = Deliverer(deliveries, jobs, settings, clock, resolver)
        return runtime

    async def start(self, metrics: Metrics) -> None:
        """Start the worker and the sender (if any), counting their events into `metrics`."""
        if self.worker is None or self.deliverer is None:
            return
        # Other processes' submits wake this worker through the database (PostgreSQL).
        await self._listening.enter_async_context(self.database.backend.listen(self.worker.notify))
        recording = observability.recording_into(metrics)
        self._running = [
            asyncio.create_task(self.worker.run(), name="worker", context=recording),
            asyncio.create_task(self.deliverer.run(), name="webhooks", context=recording),
        ]

    async def wait(self) -> None:
        """Until the worker has stopped (after `stop_worker`) or failed."""
        if self._running:
            await self._running[0]

    def stop_worker(self) -> None:
        """Stop claiming (a signal handler may call this); `stop` finishes the rest."""
        if self.worker is not None:
            self.worker.stop()

    async def stop(self) -> None:
        """Stop in reverse: the sender (what is owed waits in its table), the worker (its
        in-flight jobs finish or are handed back), LISTEN, the fetcher, the database."""
        if self.deliverer is not None:
            self.deliverer.stop()
        self.stop_worker()
        for task in reversed(self._running):
            try:
                await task
            except Exception:
                log.exception("%s stopped with an error", task.get_name())
        await self._listening.aclose()
        if self.fetcher is not None:
            await self.fetcher.aclose()
        await self.database.dispose()
