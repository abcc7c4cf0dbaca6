"""Writes of many rows at once (`Backend.update_each`, `Backend.insert_each_missing`): every
row written with its own values, types kept, whatever the count (SQLite splits the rows
into statements of 256, 128, ... rows; PostgreSQL sends one executemany)."""

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from app.store.database import Database
from app.store.dialect import MAX_GIVEN_ROWS, _chunks
from app.store.tables import domains

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)

BUMP = (
    sa.update(domains)
    .where(domains.c.domain == sa.bindparam("d"))
    .values(
        in_flight=domains.c.in_flight + sa.bindparam("n"),
        pause_reason=sa.bindparam("reason"),
        paused_until=sa.bindparam("until"),
    )
)


def test_chunks_are_powers_of_two_that_cover_every_row_once():
    for total in range(0, 3 * MAX_GIVEN_ROWS + 7):
        chunks = _chunks(total)
        assert sum(count for _, count in chunks) == total
        assert [start for start, _ in chunks] == [
            sum(count for _, count in chunks[:i]) for i in range(len(chunks))
        ]
        assert all(count & (count - 1) == 0 and count <= MAX_GIVEN_ROWS for _, count in chunks)
    assert _chunks(40) == [(0, 32), (32, 8)]


@pytest.mark.parametrize("count", [1, 3, 40, MAX_GIVEN_ROWS + 45])
async def test_each_row_is_written_with_its_own_values(database_url, count):
    database = Database(database_url)
    backend = database.backend
    names = [f"d{i:04}.test" for i in range(count)]
    try:
        # Half the rows exist already: inserting them again is skipped, not an error.
        existing = [{"domain": d, "consecutive_failures": 7, "in_flight": 1} for d in names[::2]]
        await database.transact(
            lambda conn: conn.execute(backend.insert_missing(domains), existing)
        )
        rows = [{"domain": d, "consecutive_failures": 0, "in_flight": 0} for d in names]
        await database.transact(lambda conn: backend.insert_each_missing(conn, domains, rows))

        bumps = [
            {
                "d": d,
                "n": i,
                "reason": None if i % 3 else f"because {i}",
                "until": None if i % 2 else T0 + timedelta(seconds=i),
            }
            for i, d in enumerate(names)
        ]
        await database.transact(lambda conn: backend.update_each(conn, BUMP, bumps))

        async with database.read() as conn:
            found = (await conn.execute(sa.select(domains).order_by(domains.c.domain))).all()
    finally:
        await database.dispose()
    assert [row.domain for row in found] == names
    for i, row in enumerate(found):
        assert row.consecutive_failures == (7 if i % 2 == 0 else 0)
        assert row.in_flight == (1 if i % 2 == 0 else 0) + i
        assert row.pause_reason == (None if i % 3 else f"because {i}")
        assert row.paused_until == (None if i % 2 else T0 + timedelta(seconds=i))
