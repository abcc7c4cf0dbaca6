"""`ingest workers`: the worker processes that wrote the `workers` table in the last day."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.cli.jobs import JsonFlag, WideFlag, echo_json
from app.cli.runner import load_settings, run_on_store

if TYPE_CHECKING:
    from app.store.jobs import JobStore
    from app.store.workers import WorkerSeen


def workers(json_lines: JsonFlag = False, wide: WideFlag = False) -> None:
    """Worker processes: live, stopped (cleanly) or gone (silent for twice the lease, as
    INGEST_LEASE_SECONDS sets it here); with --json one per line, as GET /workers."""
    from app.cli.output import new_console, workers_table
    from app.clock import utc_now
    from app.store.workers import WorkerStore, silence
    from app.wire import WorkerOut

    unheard = silence(load_settings().lease_seconds)

    async def read(store: JobStore) -> list[WorkerSeen]:
        return await WorkerStore(store.db, store.clock).list(store.clock(), unheard)

    items = run_on_store(read)
    if json_lines:
        for worker in items:
            echo_json(WorkerOut.of(worker).model_dump(mode="json"))
        return
    console = new_console(wide)
    if not items:
        console.print("no worker has reported in the last day", highlight=False)
        return
    console.print(workers_table(items, utc_now(), None if wide else console.width))
