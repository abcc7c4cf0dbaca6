"""SQLite's one writer across processes: a write waits for another process's write, goes in
soon after it ends, and fails as an outage (503) only after WRITER_WAIT_SECONDS."""

import shutil
import sqlite3
import statistics
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from app.store.backends import sqlite
from app.store.database import Database
from app.store.outages import database_unavailable
from app.store.tables import tenants


@pytest.fixture
def sqlite_path(tmp_path: Path, sqlite_template: Path) -> Path:
    path = tmp_path / "ingest.db"
    shutil.copy(sqlite_template, path)
    return path


def hold_the_writer(
    path: Path, seconds: float, release: threading.Event | None = None
) -> tuple[threading.Thread, list[float]]:
    """Another process's write (another connection), ended after `seconds`, or once
    `release` is set (at most 30 s); the thread and when it ended."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO tenants (tenant) VALUES ('other')")
    ended: list[float] = []

    def end() -> None:
        if release is None:
            time.sleep(seconds)
        else:
            release.wait(30)
        other.execute("COMMIT")
        ended.append(time.monotonic())
        other.close()

    thread = threading.Thread(target=end)
    thread.start()
    return thread, ended


def begin_at(conn: sa.Connection) -> float:
    conn.execute(sa.delete(tenants))
    return time.monotonic()


async def test_a_write_goes_in_soon_after_another_process_lets_go(sqlite_path):
    """SQLite's own busy handler would let it in up to 100 ms late (it sleeps 100 ms at a
    time after the first 328 ms of waiting: about 78 ms late after a write of 350 ms)."""
    database = Database(f"sqlite:///{sqlite_path}")
    late = []
    try:
        for _ in range(5):
            holder, ended = hold_the_writer(sqlite_path, 0.35)
            began = await database.transact(begin_at)
            holder.join()
            late.append(began - ended[0])
    finally:
        await database.dispose()
    assert statistics.median(late) < 0.03, late


async def test_a_write_that_waits_too_long_fails_as_an_outage(sqlite_path, monkeypatch):
    monkeypatch.setattr(sqlite, "WRITER_WAIT_SECONDS", 0.2)
    database = Database(f"sqlite:///{sqlite_path}")
    # Held until the write has given up, however long a busy machine takes to try it.
    release = threading.Event()
    holder, _ = hold_the_writer(sqlite_path, 0, release)
    try:
        with pytest.raises(sa.exc.OperationalError) as raised:
            await database.transact(begin_at)
    finally:
        release.set()
        holder.join()
        await database.dispose()
    assert database_unavailable(raised.value)
    assert "locked" in str(raised.value)
