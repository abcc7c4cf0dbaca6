"""Workers and `ingest worker` run on uvloop's event loop (app/event_loops.py)."""

import asyncio
import sys

import pytest

from app import event_loops
from app.runtime import Background

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="uvloop does not build there")


def test_new_loops_are_uvloops():
    import uvloop

    loop = event_loops.new_event_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()


def test_run_runs_a_coroutine_to_its_end_on_uvloop():
    async def loop_type() -> str:
        await asyncio.sleep(0)
        return type(asyncio.get_running_loop()).__module__

    assert event_loops.run(loop_type()).startswith("uvloop")


async def test_serves_worker_thread_runs_on_uvloop():
    """serve's embedded worker runs on the background loop, which must be a uvloop, and it
    closes cleanly (its default executor shut down)."""
    background = Background()
    background.start()

    async def loop_type() -> str:
        await asyncio.to_thread(lambda: None)  # the loop's default executor, shut down at close
        return type(asyncio.get_running_loop()).__module__

    try:
        assert (await background.run(loop_type())).startswith("uvloop")
    finally:
        await background.close()
