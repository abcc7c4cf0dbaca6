"""`ingest serve`'s worker in a process of its own (INGEST_WORKER_PROCESS): started, woken,
watched and stopped by serve's `Runtime`.

A process, not a thread of serve's: a worker draining at full speed holds the interpreter
lock most of the time, and every request would wait for it (docs/design/worker.md). The
child is `ingest worker --child`, given what a worker needs and no more: its `Handoff` on
the first line of its standard input, serve's environment less the INGEST_* variables.
Each line after that one is a wake-up, one per submit to serve's API (`WorkerProcess.wake`).
When its input ends (serve stops, or dies) it stops as on SIGTERM: its jobs in flight
finish or go back, and no worker outlives its API. It runs in a session of its own, so a
terminal's Ctrl-C reaches serve alone, which then stops it. What serve does when it exits
on its own: `WorkerProcess`.
"""

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass

from app.keys import Keys
from app.model import wake_payload
from app.settings import Settings
from app.store.outages import error_wait
from app.worker.loop import wait_for_event

log = logging.getLogger("ingest.runtime")

API_SETTINGS = frozenset(
    (
        "api_keys",
        "host",
        "port",
        "max_request_bytes",
        "access_log",
        "worker_enabled",
        "worker_process",
    )
)
"""Serve's settings that only its API reads: the child is sent their defaults."""


@dataclass(frozen=True)
class Handoff:
    """What serve tells its worker child first: the settings a worker reads (serve's less
    its API's, the API keys above all), and the keys its metrics port accepts (the admins',
    by digest: the scrape serve's /metrics allows). Its environment is serve's without the
    INGEST_* variables (INGEST_API_KEYS among them)."""

    settings: Settings
    metrics_keys: Keys

    @classmethod
    def of(cls, settings: Settings) -> "Handoff":
        defaults = {name: Settings.model_fields[name].default for name in API_SETTINGS}
        return cls(settings.model_copy(update=defaults), Keys.of(settings.api_keys).admins())

    def line(self) -> bytes:
        keys = dict(self.metrics_keys.tenants)
        values = {"settings": self.settings.to_values(), "metrics_keys": keys}
        return json.dumps(values).encode() + b"\n"

    @classmethod
    def from_line(cls, line: str) -> "Handoff":
        values = json.loads(line)
        return cls(Settings.from_values(values["settings"]), Keys(values["metrics_keys"]))


STEADY_SECONDS = 60.0
"""A child that ran this long had started fine: a crash after it counts as the first."""

STOP_MARGIN_SECONDS = 10.0
"""How long past INGEST_SHUTDOWN_GRACE_SECONDS a stopping child may take (recording what
finished, handing back the rest) before it is killed."""


class WorkerProcess:
    """Serve's handle on its worker child. If the child exits while serve runs, serve logs
    how and starts another, after a wait that grows with the crashes in a row; one that
    stopped cleanly (it was sent SIGTERM itself) is not started again."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._process: asyncio.subprocess.Process | None = None
        self._running: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    def start(self) -> None:
        """Start the child, and another whenever it crashes, until `stop`."""
        self._running = asyncio.create_task(self._run(), name="worker process")

    def wake(self, priority: int | None) -> None:
        """Tell the child something may be due now (a submit): a line with the highest
        priority submitted (`app.model.wake_payload`; SQLite has no NOTIFY to carry it to
        another process), unless the pipe still holds unread lines (they wake it all the
        same) and this one says no higher priority."""
        stdin = self._process.stdin if self._process else None
        if stdin is None or stdin.is_closing():
            return
        if stdin.transport.get_write_buffer_size() and (priority or 0) <= 0:
            return
        stdin.write(wake_payload(priority).encode() + b"\n")

    async def stop(self) -> None:
        """End the child's input and wait for it to stop (killed if it takes too long)."""
        self._stopping.set()
        if self._running is not None:
            await self._running

    async def _run(self) -> None:
        crashes = 0
        while not self._stopping.is_set():
            try:
                process = self._process = await self._spawn()
            except OSError as exc:
                crashes += 1
                log.error(
                    "cannot start a worker process: %s; trying again in %gs",
                    exc,
                    error_wait(crashes),
                )
                await wait_for_event(self._stopping, error_wait(crashes))
                continue
            started = time.monotonic()
            stopping = asyncio.create_task(self._stopping.wait())
            exited = asyncio.create_task(process.wait())
            await asyncio.wait((stopping, exited), return_when=asyncio.FIRST_COMPLETED)
            stopping.cancel()
            if not exited.done():
                exited.cancel()
                await self._end(process)
                return
            code = exited.result()
            if code == 0:
                log.warning("worker process %d stopped; serve runs no worker now", process.pid)
                return
            steady = time.monotonic() - started >= STEADY_SECONDS
            crashes = 1 if steady else crashes + 1
            wait = error_wait(crashes)
            log.error(
                "worker process %d exited with %d; starting another in %gs",
                process.pid,
                code,
                wait,
            )
            await wait_for_event(self._stopping, wait)

    async def _spawn(self) -> asyncio.subprocess.Process:
        """`python -P -m app worker --child`: ingest's `app` as installed, never one in the
        working directory (plain `-m` imports that one first, and would run it with every
        secret serve holds)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-P",
            "-m",
            "app",
            "worker",
            "--child",
            stdin=subprocess.PIPE,
            env={name: v for name, v in os.environ.items() if not name.startswith("INGEST_")},
            start_new_session=True,
        )
        assert process.stdin is not None
        process.stdin.write(Handoff.of(self.settings).line())
        log.info("worker process %d started", process.pid)
        return process

    async def _end(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None
        process.stdin.close()
        try:
            async with asyncio.timeout(self.settings.shutdown_grace_seconds + STOP_MARGIN_SECONDS):
                await process.wait()
        except TimeoutError:
            log.error("worker process %d did not stop in time: killed", process.pid)
            process.kill()
            await process.wait()
