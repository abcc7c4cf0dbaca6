"""Service processes for tests: `ingest worker` and `ingest serve` as subprocesses, their logs
in files, and waits on what they say (a process is ready when it logs so), never on time.

A loaded 2-core machine may take seconds to import and start a process; every wait here is
for an event, with deadlines sized for that machine.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

STARTUP_SECONDS = 60.0
"""How long a process may take to say it is ready (imports on a busy machine included)."""


class ServiceProcess:
    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for_line(self, needle: str, timeout: float = STARTUP_SECONDS) -> None:
        """Until the process's log holds `needle`; fail if it exits or the deadline passes."""
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            if self.process.poll() is not None:
                pytest.fail(f"process exited ({self.process.returncode}): {self.text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {needle!r} within {timeout}s: {self.text()[-3000:]}")
            await asyncio.sleep(0.05)

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def service_env(database_url: str, **settings: object) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INGEST_")}
    env |= {
        "INGEST_DATABASE_URL": database_url,
        "INGEST_LOG_LEVEL": "INFO",
        "INGEST_ALLOW_PRIVATE_NETWORKS": "true",  # the test servers are on 127.0.0.1
        # As in `make_settings`: no extraction processes unless a test asks for them.
        "INGEST_EXTRACT_PROCESSES": "0",
    }
    return env | {f"INGEST_{name.upper()}": str(value) for name, value in settings.items()}


INGEST = (sys.executable, "-m", "app")
"""How the tests start `ingest`."""

INSTALLED = (str(Path(sys.executable).with_name("ingest")),)
"""`ingest` as installed (the console script), which imports nothing from the directory it
is started in, as `python -m app` does."""


@contextmanager
def service(
    command: str,
    log: Path,
    database_url: str,
    *args: str,
    cwd: Path | None = None,
    program: tuple[str, ...] = INGEST,
    **settings: object,
) -> Iterator[ServiceProcess]:
    """`program <command> <args>` in its own process, configured through INGEST_* variables;
    stopped (SIGTERM, then SIGKILL) on the way out."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*program, command, *args],
            cwd=cwd,
            env=service_env(database_url, **settings),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    running = ServiceProcess(process, log)
    try:
        yield running
    except BaseException:
        # Into the failed test's captured output: what the process said it was doing.
        print(f"--- the end of `{command}`'s log ({log}) ---\n{running.text()[-4000:]}")
        raise
    finally:
        running.stop()


@contextmanager
def worker_process(log: Path, database_url: str, **settings: Any) -> Iterator[ServiceProcess]:
    """`ingest worker`; wait with `await process.wait_for_line(READY)` before relying on it."""
    with service("worker", log, database_url, **settings) as process:
        yield process


READY = " started ("
"""What a worker logs once it runs: `worker <id> started (<n> slots)`."""
