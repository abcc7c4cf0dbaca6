"""The extraction processes: where a fetched body becomes a `Document`, off the event loop.

A good extractor costs many times a small page's fetch (docs/design/extraction.md), and it
is Python: on the worker's loop it would stall every fetch, in a thread it would hold the
interpreter lock. So bodies go to a pool of processes (INGEST_EXTRACT_PROCESSES, by default
one per core), each bounded in time, memory and age (`ExtractionPool`). What costs less than
the trip there stays on the worker's loop (`where`). INGEST_EXTRACT_PROCESSES=0 parses the
rest in a thread of the worker (no deadline, no memory cap: for tests and the smallest
set-ups).
"""

import asyncio
import contextlib
import logging
import multiprocessing
import resource
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import TypeVar, TypeVarTuple

from pebble import ProcessExpired, ProcessPool

from app.content.document import Document
from app.content.extract import ExtractionLimits, extract
from app.content.types import has_text, is_html, is_pdf, media_type
from app.fetch.turns import FairTurns

log = logging.getLogger(__name__)

T = TypeVar("T")
Ts = TypeVarTuple("Ts")

TASKS_PER_PROCESS = 1000


class ExtractionTimeout(Exception):
    """The body was not extracted within INGEST_EXTRACT_TIMEOUT_SECONDS."""


class ExtractionFailed(Exception):
    """The extraction process died (out of memory, a crash in a native parser)."""


@dataclass(frozen=True)
class PoolSettings:
    processes: int
    timeout_seconds: float
    memory_mb: int
    limits: ExtractionLimits
    tenant_weights: Mapping[str, int] = field(default_factory=dict)
    """Tenants' shares of the extraction turns (INGEST_TENANT_WEIGHTS; 1 for one not named)."""


SMALL_PAGE_TAGS = 32
"""HTML of at most this many tags is extracted on the worker's loop: trafilatura's time on it
is less than the trip to a process and back, or to a thread and the interpreter lock handed
to and fro (docs/design/extraction.md)."""
SMALL_PAGE_BYTES = 8 * 1024
"""...and of at most this many bytes (a few tags of a long text cost little more). The line
for every other text body too: its charset detection, JSON check or XML's text is linear,
but past a few KB it is worth the trip, which puts it under the deadline."""


def where(content_type: str | None, body: bytes) -> str:
    """Where a body is extracted: "loop" (a small page; plain text, JSON, XML or any other
    text of at most SMALL_PAGE_BYTES; a body with no text, which is not read) or "process"
    (a PDF, a page past the small page's bounds, any larger text)."""
    media = media_type(content_type)
    if is_pdf(media):
        return "process"
    if not has_text(media):
        return "loop"
    small = len(body) <= SMALL_PAGE_BYTES
    if is_html(media):
        return "loop" if small and body.count(b"<") <= SMALL_PAGE_TAGS else "process"
    return "loop" if small else "process"


def _start_process(memory_mb: int) -> None:
    """In each new process: the memory cap, before the first body."""
    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _extract_in_process(
    body: bytes, content_type: str | None, url: str | None, limits: ExtractionLimits
) -> Document:
    return extract(body, content_type, url=url, limits=limits)


class ExtractionPool:
    """The processes that extract bodies, each bounded:

    - time: a body not done within INGEST_EXTRACT_TIMEOUT_SECONDS has its process killed and
      fails `ExtractionTimeout` (fatal: the same body would take as long again);
    - memory: each process's address space is capped (RLIMIT_AS, INGEST_EXTRACT_MEMORY_MB), so
      a compression bomb in a PDF or a parse that explodes ends the process (or raises
      MemoryError in it) and the body fails `ExtractionFailed`, without touching the worker;
    - age: a process is replaced after TASKS_PER_PROCESS bodies, so fragmentation and caches
      (lxml's, trafilatura's) never accumulate.

    The processes start on first use (`forkserver`: a clean process that has imported the
    extractors once, so a new one starts quickly and inherits no sockets or threads of the
    worker). Every body past `where`'s bounds goes there, whatever its type: megabytes of text
    parsed in a thread hold the interpreter lock (the loop and the API wait) with no deadline.
    """

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self._pool: ProcessPool | None = None
        self._starting = threading.Lock()
        # One parse at a time on the same thread: a large body parses into many times its
        # size, and every new thread would keep a malloc arena of its own.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-parse")
        # Bodies past a small page's size wait here for their turn still spooled (on disk
        # past the fetcher's SPOOL_BYTES), not read into memory while 32 slots queue for two
        # processes; the turns go round the tenants (`app.fetch.turns`).
        weights = settings.tenant_weights
        self._turns = FairTurns(settings.processes, lambda tenant: weights.get(tenant, 1))

    def turn(self, size: int, tenant: str) -> contextlib.AbstractAsyncContextManager[object]:
        """Held while `tenant`'s body of `size` bytes is read and extracted: a turn among the
        bodies in flight for a body past SMALL_PAGE_BYTES, nothing to wait for otherwise (a
        smaller one that leaves the loop waits in `extract`)."""
        return self._turns.turn(tenant) if size > SMALL_PAGE_BYTES else contextlib.nullcontext()

    async def extract(
        self, body: bytes, content_type: str | None, url: str | None, tenant: str | None = None
    ) -> Document:
        """The body's Document; raises UnparseableContent, ExtractionTimeout, ExtractionFailed.
        A body of at most SMALL_PAGE_BYTES that leaves the loop takes its turn here, as
        `tenant`'s (a larger one holds its own already: `turn`)."""
        settings = self.settings
        place = where(content_type, body)
        if place == "loop":
            return extract(body, content_type, url=url, limits=settings.limits)
        if tenant is not None and len(body) <= SMALL_PAGE_BYTES:
            async with self._turns.turn(tenant):
                return await self.extract(body, content_type, url)
        return await self._in_processes(
            _extract_in_process, (body, content_type, url, settings.limits), "extracted"
        )

    async def call(self, fn: Callable[[*Ts], T], *args: *Ts) -> T:
        """`fn(*args)` in the processes, under the bodies' deadline and memory cap (`fn` a
        module's function: it, its arguments and its result cross by pickle); in the parse
        thread with INGEST_EXTRACT_PROCESSES=0. For parsing other than a body's (robots.txt,
        `app.fetch.robots_reader`); raises what `fn` raises, ExtractionTimeout, ExtractionFailed."""
        return await self._in_processes(fn, args, "done")

    async def _in_processes(self, fn: Callable[[*Ts], T], args: tuple[*Ts], done: str) -> T:
        """`fn(*args)` where `call` says; `done` words the timeout ("not extracted within")."""
        settings = self.settings
        if settings.processes == 0:  # the fallback: no deadline, no memory cap
            return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)
        future = self._processes().schedule(fn, args=args, timeout=settings.timeout_seconds)
        try:
            result: T = await asyncio.wrap_future(future)
        except FutureTimeout:
            raise ExtractionTimeout(
                f"not {done} within {settings.timeout_seconds:g}s (INGEST_EXTRACT_TIMEOUT_SECONDS)"
            ) from None
        except MemoryError:
            raise ExtractionFailed(
                f"extraction ran out of memory ({settings.memory_mb} MB, INGEST_EXTRACT_MEMORY_MB)"
            ) from None
        except ProcessExpired as exc:
            raise ExtractionFailed(
                f"the extraction process died (exit code {exc.exitcode}): out of memory"
                f" ({settings.memory_mb} MB, INGEST_EXTRACT_MEMORY_MB) or a crash"
            ) from None
        except BrokenProcessPool:  # every process died at once: started again on next use
            raise ExtractionFailed("the extraction processes died") from None
        except asyncio.CancelledError:
            future.cancel()  # type: ignore[no-untyped-call]
            raise
        return result

    def _processes(self) -> ProcessPool:
        """The pool, started on first use, and again if it broke."""
        with self._starting:  # `warm` may run in another thread
            return self._started()

    def _started(self) -> ProcessPool:
        if self._pool is None or not self._pool.active:
            if self._pool is not None:
                log.warning("extraction processes stopped; starting them again")
            self._pool = ProcessPool(
                max_workers=self.settings.processes,
                max_tasks=TASKS_PER_PROCESS,
                initializer=_start_process,
                initargs=(self.settings.memory_mb,),
                context=_CONTEXT,
            )
            _ = self._pool.active  # pebble starts its processes when first asked: here
        return self._pool

    def warm(self) -> None:
        """Start the processes now, not on the first body (benchmarks, a worker's start)."""
        if self.settings.processes > 0:
            self._processes()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.stop()  # type: ignore[no-untyped-call]
            self._pool.join(timeout=5)
            self._pool = None
        self._thread.shutdown(wait=False, cancel_futures=True)


_CONTEXT = multiprocessing.get_context("forkserver")
# The forkserver imports the extractors once; every process forked from it has them loaded.
_CONTEXT.set_forkserver_preload(["app.content.extract", "app.rules.robots"])
