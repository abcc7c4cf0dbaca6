"""The running service, built in one place: the only composition root.

`Runtime.build(settings)` makes the database and the stores and, when the process runs a
worker, the fetcher, the job worker, the maintenance service beside it and the webhook
sender, each handed what it needs at construction (nothing is patched in afterwards).
`start()` sets them going, with LISTEN for other processes' submits; `stop()` stops them in
reverse. The FastAPI lifespan (`app.api.app`), `ingest worker` (`app.cli`) and the
operators' commands (`app.cli.runner`) all take their system from a `Runtime`.

The loops run on an event loop of their own, in a thread (`Background`), with their own
connections to the same database (`Database.beside`), so an API request does not wait
behind the fetches' callbacks (docs/design/worker.md). Calls between the two loops are few
and named here: a submit wakes the worker, a stop stops it. With INGEST_WORKER_PROCESS,
`ingest serve` runs its worker in a child process instead (`app.worker.process`).
"""

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from app import event_loops
from app.clock import Clock, utc_now
from app.fetch.guard import Destinations, Resolver, system_resolver
from app.keys import Keys
from app.observability import events as observability
from app.part_settings import PartSettings, destinations_of
from app.settings import Settings
from app.store.crawls import CrawlStore
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.reads import ContentStore
from app.store.workers import WorkerStore
from app.worker.process import WorkerProcess

if TYPE_CHECKING:
    # Imported by `build` when it builds a worker (with the worker's queue): an operator's
    # command takes its stores from here without importing the fetcher's parsers and
    # extractors.
    from app.fetch.fetcher import Fetcher
    from app.observability.metrics import Metrics
    from app.worker.crawler import Crawler
    from app.worker.job_worker import Worker
    from app.worker.maintenance import Maintenance
    from app.worker.webhooks import Deliverer

log = logging.getLogger("ingest.runtime")

T = TypeVar("T")


class Background:
    """An event loop running in a thread of its own, for the worker, its chores and the
    sender."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._loop = event_loops.new_event_loop()
        # A daemon: a process that exits without `close` (a crash) is not held open by it.
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ingest-worker", daemon=True
        )
        self._thread.start()

    async def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the background loop and wait for it from the caller's loop; on the
        caller's loop if the background one never started (nothing else ran there)."""
        if self._loop is None:
            return await work
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(work, self._loop))

    def call(self, callback: Callable[[], None]) -> None:
        """Call `callback` on the background loop soon; from any thread. Before the loop
        starts, at once (nothing waits on it yet); after it is closed, never."""
        if self._loop is None:
            callback()
            return
        with contextlib.suppress(RuntimeError):  # closed: nothing is left to wake or stop
            self._loop.call_soon_threadsafe(callback)

    async def close(self) -> None:
        """Stop the loop (its work done) and wait for the thread to end: its default
        executor's threads (DNS lookups, large bodies' parsing) too, as `asyncio.run` would."""
        if self._loop is None or self._thread is None:
            return
        await self.run(self._loop.shutdown_asyncgens())
        await self.run(self._loop.shutdown_default_executor())
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)
        self._loop.close()


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
    crawls: CrawlStore
    destinations: Destinations
    """Where jobs may fetch, as the API checks a submitted URL: built once (a long
    INGEST_BLOCKED_HOSTS takes milliseconds to parse)."""
    keys: Keys
    """INGEST_API_KEYS as the API checks them: digested once."""
    background: Background = field(default_factory=Background)
    worker_database: Database | None = None
    fetcher: "Fetcher | None" = None
    worker: "Worker | None" = None
    maintenance: "Maintenance | None" = None
    crawler: "Crawler | None" = None
    deliverer: "Deliverer | None" = None
    worker_process: WorkerProcess | None = None
    _running: list[asyncio.Task[None]] = field(default_factory=list)
    _listening: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        run_worker: bool,
        in_a_process: bool = False,
        clock: Clock = utc_now,
        resolver: Resolver = system_resolver,
        operator: bool = False,
    ) -> "Runtime":
        """The system for `settings`; with `run_worker`, a job worker (with the maintenance
        service beside it) and a webhook sender, in this process or, `in_a_process`, in a
        child (`app.worker.process`). `clock` and `resolver` (the SSRF guard's DNS) are
        there for tests to replace. For an `operator`'s command (`app.cli.runner`), submits,
        retries and refreshes are not held to INGEST_TENANT_MAX_PENDING."""
        database = Database(settings.database_url, settings.database_pool_size)
        # Parsed once (a long INGEST_BLOCKED_HOSTS takes milliseconds): the API's checks, the
        # fetcher's guard and the webhooks' guard share it.
        destinations = destinations_of(settings)
        background = Background()
        # A submit in this process wakes the worker at once: this process's, on the worker's
        # loop, or the child's, through its pipe.
        child = WorkerProcess(settings) if run_worker and in_a_process else None

        def on_submit(priority: int | None) -> None:
            if child is not None:
                child.wake(priority)
            elif runtime.worker is not None:
                worker = runtime.worker
                background.call(lambda: worker.submitted(priority))

        jobs = JobStore(
            database,
            clock,
            on_submit,
            settings.domain_max_in_flight,
            max_pending=0 if operator else settings.tenant_max_pending,
            tenant_max_in_flight=settings.tenant_max_in_flight,
        )
        runtime = cls(
            settings,
            clock,
            database,
            jobs,
            DomainStore(database, clock, on_submit),
            DeliveryStore(database),
            ContentStore(database),
            WorkerStore(database, clock),
            CrawlStore(database, clock, on_submit),
            destinations,
            Keys.of(settings.api_keys),
            background,
            worker_process=child,
        )
        if run_worker and child is None:
            from app.fetch.fetcher import Fetcher
            from app.fetch.listing_reader import ListingReader
            from app.fetch.robots_reader import RobotsTxt
            from app.store.maintenance import MaintenanceStore
            from app.store.queue import Queue
            from app.worker.crawl_pages import CrawlPages
            from app.worker.crawler import Crawler
            from app.worker.job_worker import Worker
            from app.worker.maintenance import Maintenance
            from app.worker.webhooks import Deliverer

            # The parts below take their own view of the settings, never the whole.
            views = PartSettings.of(settings)
            beside = runtime.worker_database = database.beside()
            fetcher = runtime.fetcher = Fetcher(
                views.fetch, resolver=resolver, destinations=destinations
            )
            robots = RobotsTxt(fetcher, views.robots, clock)

            def crawl_made_jobs(priority: int | None) -> None:
                if runtime.worker is not None:  # on the worker's loop: the crawler runs there
                    runtime.worker.submitted(priority)

            crawls = CrawlStore(
                beside, clock, crawl_made_jobs, webhook_max_attempts=settings.webhook_max_attempts
            )
            worker = runtime.worker = Worker(
                Queue(beside, views.shares, views.records),
                fetcher,
                views.worker,
                views.batching,
                views.shares,
                views.retry,
                clock,
                robots=robots,
                crawl_pages=CrawlPages(crawls),
            )
            runtime.crawler = Crawler(
                crawls,
                ListingReader(
                    fetcher, views.crawls.listing_max_bytes, views.crawls.listing_max_entries
                ),
                views.crawls,
                worker.id,
                clock,
                robots,
            )
            runtime.maintenance = Maintenance(
                MaintenanceStore(beside),
                views.maintenance,
                worker.completer,
                clock,
                worker.id,
                wake=worker.notify,
            )
            runtime.deliverer = Deliverer(
                DeliveryStore(beside),
                JobStore(beside, clock),
                ContentStore(beside),
                crawls,
                views.deliveries,
                views.retry,
                destinations,
                clock,
                resolver,
            )
        return runtime

    async def start(self, metrics: "Metrics") -> None:
        """Start the worker, its chores and the sender (if any) on their own loop, counting
        their events into `metrics`; return once they run. A worker process: start it."""
        if self.worker_process is not None:
            self.worker_process.start()
        if self.worker is None:
            return
        self.background.start()
        await self.background.run(self._start_background(metrics))

    async def _start_background(self, metrics: "Metrics") -> None:
        assert self.worker and self.maintenance and self.deliverer and self.worker_database
        # Other processes' submits wake this worker through the database (PostgreSQL).
        listening = self.worker_database.backend.listen(
            self._woken, self.settings.listen_database_url
        )
        await self._listening.enter_async_context(listening)
        # The extraction processes start beside the worker's first claims, not in the way of
        # the first page that needs them (starting them takes a while: docs/design/worker.md).
        assert self.fetcher is not None
        asyncio.get_running_loop().run_in_executor(None, self.fetcher.extraction.warm)
        counting = observability.counting_into(metrics)
        self._running = [
            asyncio.create_task(self.worker.run(), name="worker", context=counting),
            asyncio.create_task(self.deliverer.run(), name="webhooks", context=counting),
            asyncio.create_task(self.maintenance.run(), name="maintenance", context=counting),
        ]
        if self.crawler is not None:
            self._running.append(
                asyncio.create_task(self.crawler.run(), name="crawler", context=counting)
            )

    def _woken(self, priority: int | None) -> None:
        """Another process submitted jobs (up to `priority`), or something else that may be
        due now (None: a requeue, a resumed domain, a crawl), on the worker's loop."""
        assert self.worker is not None
        self.worker.submitted(priority)
        if priority is None and self.crawler is not None:
            self.crawler.notify()

    async def wait(self) -> None:
        """Until the worker has stopped (after `stop_worker`) or failed."""
        if self._running:
            await self.background.run(self._worker_ended())

    async def _worker_ended(self) -> None:
        await self._running[0]

    def wake_worker(self, priority: int | None) -> None:
        """Something may be due now (a submit of jobs up to `priority` to the `ingest serve`
        whose worker process this is): wake the worker the way a submit in this process
        does, and its crawl loop (the submit may have been a crawl's)."""
        self.jobs.on_submit(priority)
        if priority is None and self.crawler is not None:
            crawler = self.crawler
            self.background.call(crawler.notify)

    def crawl_submitted(self) -> None:
        """A crawl was submitted in this process: its crawl loop (this process's, or its
        worker process's) moves it on at once."""
        if self.worker_process is not None:
            self.worker_process.wake(None)
        elif self.crawler is not None:
            crawler = self.crawler
            self.background.call(crawler.notify)

    def stop_worker(self) -> None:
        """Stop claiming, and the chores beside it (from any thread: a signal handler may
        call this); `stop` finishes the rest."""
        if self.worker is not None:
            self.background.call(self.worker.stop)
        if self.maintenance is not None:
            self.background.call(self.maintenance.stop)
        if self.crawler is not None:
            self.background.call(self.crawler.stop)

    async def stop(self) -> None:
        """Stop in reverse: the chores, the sender (what is owed waits in its table), the
        worker (its in-flight jobs finish or are handed back), LISTEN, the fetcher, their
        loop, the database. A worker process: stop it first."""
        if self.worker_process is not None:
            await self.worker_process.stop()
        if self.worker is not None:
            await self.background.run(self._stop_background())
        await self.background.close()
        await self.database.dispose()

    async def _stop_background(self) -> None:
        assert self.worker and self.maintenance and self.deliverer
        assert self.fetcher and self.worker_database
        self.maintenance.stop()
        if self.crawler is not None:
            self.crawler.stop()
        self.deliverer.stop()
        self.worker.stop()
        for task in reversed(self._running):
            try:
                await task
            except Exception:
                log.exception("%s stopped with an error", task.get_name())
        await self._listening.aclose()
        await self.fetcher.aclose()
        await self.worker_database.dispose()
