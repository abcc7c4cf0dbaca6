"""`ingest workers`: the worker processes that wrote the `workers` table in the last day."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.cli.jobs import JsonFlag, WideFlag, echo_json
from app.cli.runner import run_on_runtime

if TYPE_CHECKING:
    from app.runtime import Runtime
    from app.store.workers import WorkerSeen


def workers(json_lines: JsonFlag = False, wide: WideFlag = False) -> None:
    """Worker processes: live, stopped (cleanly) or gone (silent for twice the lease, as
    INGEST_LEASE_SECONDS sets it here); with --json one per line, as GET /workers."""
    from app.cli.output import new_console, workers_table
    from app.clock import utc_now
    from app.store.workers import silence
    from app.wire import WorkerOut

    async def read(runtime: Runtime) -> list[WorkerSeen]:
        unheard = silence(runtime.settings.lease_seconds)
        return await runtime.workers.list(runtime.clock(), unheard)

    items = run_on_runtime(read)
    if json_lines:
        for worker in items:
            echo_json(WorkerOut.of(worker).model_dump(mode="json"))
        return
    console = new_console(wide)
    if not items:
        console.print("no worker has reported in the last day", highlight=False)
        return
    console.print(workers_table(items, utc_now(), None if wide else console.width))
