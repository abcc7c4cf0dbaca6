"""Diffs of two content versions (`?diff=`), bounded: the one CPU-heavy thing the API does.

difflib is Python, and its cost can grow with the square of the lines (many lines each
repeated a little too rarely to be skipped as junk). So a diff is
- refused before any work past INGEST_DIFF_MAX_BYTES or INGEST_DIFF_MAX_LINES on either side;
- run in processes of the API's own (INGEST_DIFF_PROCESSES, started on the first diff;
  `ingest serve` may run no worker, so never the worker's extraction pool): past
  INGEST_DIFF_TIMEOUT_SECONDS its process is killed, and so it is when the request is
  cancelled or its client leaves (pebble kills a process whose task is cancelled);
- held to INGEST_DIFF_PER_KEY in flight per API key, in each API process.
Both refusals of a pair of versions (too large, too slow) are final: the same pair would
take as long again. How the API answers each is app/api/routes/content.py's.
"""

import asyncio
import logging
import math
import multiprocessing
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from pebble import ProcessExpired, ProcessPool
from starlette.types import Receive

from app.content.diff import line_count, unified
from app.settings import Settings

log = logging.getLogger("ingest.api")

Side = tuple[int, str]
"""A version's number and its text (or Markdown)."""


class DiffRefused(Exception):
    """A pair of versions this service does not diff: too large or too slow to (final)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class DiffsBusy(Exception):
    """The key has INGEST_DIFF_PER_KEY diffs in flight already."""

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DiffFailed(Exception):
    """The diff's process died (killed from outside, out of memory): not the pair's fault."""


@dataclass(frozen=True)
class DiffLimits:
    max_bytes: int
    max_lines: int
    timeout_seconds: float
    per_key: int
    processes: int

    @classmethod
    def of(cls, settings: Settings) -> "DiffLimits":
        return cls(
            settings.diff_max_bytes,
            settings.diff_max_lines,
            settings.diff_timeout_seconds,
            settings.diff_per_key,
            settings.diff_processes,
        )


class Diffs:
    """The diff processes and the diffs each key has in flight, in this API process."""

    def __init__(self, limits: DiffLimits) -> None:
        self.limits = limits
        self._pool: ProcessPool | None = None
        self._starting = threading.Lock()
        # One entry per key with a diff in flight: bounded by the configured keys.
        self._in_flight: dict[str | None, int] = {}

    async def unified(
        self, key: str | None, old: Side, new: Side, gone: Callable[[], Awaitable[None]]
    ) -> str | None:
        """The unified diff from `old` to `new` for `key` (a key's digest; None on an open
        service), or None if `gone` returned first (the client left; the diff is killed).
        Raises DiffRefused, DiffsBusy, DiffFailed."""
        for side in (old, new):
            self._check(side)
        limits = self.limits
        held = self._in_flight.get(key, 0)
        if held >= limits.per_key:
            raise DiffsBusy(
                f"this API key has {held} diffs in flight (INGEST_DIFF_PER_KEY); try again "
                "when one is done",
                math.ceil(limits.timeout_seconds),
            )
        self._in_flight[key] = held + 1
        try:
            return await self._run(old, new, gone)
        finally:
            self._in_flight[key] -= 1
            if not self._in_flight[key]:
                del self._in_flight[key]

    def _check(self, side: Side) -> None:
        number, text = side
        limits = self.limits
        if _utf8_longer(text, limits.max_bytes):
            raise DiffRefused(
                "diff_too_large",
                f"version {number} is larger than INGEST_DIFF_MAX_BYTES ({limits.max_bytes} "
                "bytes) allows a diff of: get both versions and diff them yourself",
            )
        lines = line_count(text)
        if lines > limits.max_lines:
            raise DiffRefused(
                "diff_too_large",
                f"version {number} has {lines} lines, more than INGEST_DIFF_MAX_LINES "
                f"({limits.max_lines}) allows a diff of: get both versions and diff them yourself",
            )

    async def _run(self, old: Side, new: Side, gone: Callable[[], Awaitable[None]]) -> str | None:
        pool = self._pool
        if pool is None or not pool.active:
            pool = await asyncio.to_thread(self._processes)  # starting processes blocks
        timeout = self.limits.timeout_seconds
        future = pool.schedule(
            unified,
            args=(old[1], new[1], f"version {old[0]}", f"version {new[0]}"),
            timeout=timeout,
        )
        done = asyncio.wrap_future(future)
        leaving = asyncio.ensure_future(gone())
        try:
            await asyncio.wait((done, leaving), return_when=asyncio.FIRST_COMPLETED)
        finally:
            leaving.cancel()
            if not done.done():
                future.cancel()  # type: ignore[no-untyped-call]
        if not done.done():
            return None
        try:
            return done.result()
        except FutureTimeout:
            raise DiffRefused(
                "diff_timeout",
                f"the diff of versions {old[0]} and {new[0]} took longer than "
                f"INGEST_DIFF_TIMEOUT_SECONDS ({timeout:g} s): get both versions and diff "
                "them yourself",
            ) from None
        except (ProcessExpired, BrokenProcessPool, MemoryError) as exc:
            log.warning("a diff's process died: %r", exc)
            raise DiffFailed("the diff's process died; try again shortly") from None

    def _processes(self) -> ProcessPool:
        """The pool, started on first use, and again if it broke."""
        with self._starting:
            if self._pool is None or not self._pool.active:
                self._pool = ProcessPool(max_workers=self.limits.processes, context=_CONTEXT)
                _ = self._pool.active  # pebble starts its processes when first asked: here
            return self._pool

    def close(self) -> None:
        """Kill the processes (a diff in flight with them); blocks: call it in a thread."""
        with self._starting:
            if self._pool is not None:
                self._pool.stop()  # type: ignore[no-untyped-call]
                self._pool.join(timeout=5)
                self._pool = None


async def client_gone(receive: Receive) -> None:
    """Return once the ASGI `receive` says the client has disconnected."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _utf8_longer(text: str, limit: int) -> bool:
    """Whether `text` takes more than `limit` bytes as UTF-8 (encoded only when in doubt)."""
    if len(text) > limit:
        return True
    return 4 * len(text) > limit and len(text.encode("utf-8", "surrogatepass")) > limit


# A process forked from a clean server: it inherits no sockets or threads of the API.
_CONTEXT = multiprocessing.get_context("forkserver")
