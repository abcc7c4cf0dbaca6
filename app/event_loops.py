"""The event loops ingest runs on: uvloop's (a dependency everywhere but on Windows, where
it does not build), else asyncio's own.

uvloop (libuv under asyncio's interface) spends less CPU on each callback, socket read and
timer than asyncio's pure-Python loop, and a queue's work is mostly those: `ingest serve`
runs its API on it (uvicorn takes it, and httptools' parser, when installed), and every
worker runs on it, in `ingest worker`, in serve's worker thread and in its worker process.
"""

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop: uvloop's, but on Windows (the dependency is declared for every
    other platform)."""
    if sys.platform == "win32":
        return asyncio.new_event_loop()
    import uvloop

    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on a loop from `new_event_loop`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
