"""Writes of many rows at once (`Backend.updates`, `Backend.inserts`): every
row written with its own values, types kept, whatever the count (SQLite splits the rows
into statements of up to 256 rows; PostgreSQL sends one executemany). Reads of many rows
(`Backend.all_rows`, one JSON row on SQLite): every row, of the types a plain read gives."""

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
import sqlalchemy as sa

from app.model import NewJob
from app.store.backends.postgres.listen import NOTIFY_CHANNEL
from app.store.backends.sqlite.many_rows import MAX_GIVEN_ROWS, _in_statements
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.tables import domains, jobs, tenants

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


def test_rows_go_in_few_statement_shapes():
    """One statement per 256 rows, padded to a power of two with null rows, which `_row`
    (null) marks: so there are at most 9 shapes to compile per statement."""
    rows = [{"a": i, "b": str(i)} for i in range(2 * MAX_GIVEN_ROWS + 40)]
    statements = _in_statements(rows)
    assert [size for size, _ in statements] == [MAX_GIVEN_ROWS, MAX_GIVEN_ROWS, 64]
    last = statements[-1][1]
    assert (last["_row_39"], last["a_39"], last["b_39"]) == (39, 2 * MAX_GIVEN_ROWS + 39, "551")
    assert (last["_row_40"], last["a_40"], last["b_40"]) == (None, None, None)
    assert len(last) == 3 * 64
    assert [size for size, _ in _in_statements(rows[:1])] == [1]
    assert _in_statements([]) == []


@pytest.mark.parametrize("count", [1, 3, 40, MAX_GIVEN_ROWS + 45])
async def test_each_row_is_written_with_its_own_values(database_url, count):
    database = Database(database_url)
    backend = database.backend
    names = [f"d{i:04}.test" for i in range(count)]
    try:
        # Half the rows exist already: inserting them again is skipped, not an error.
        existing = [{"domain": d, "consecutive_failures": 7, "in_flight": 1} for d in names[::2]]
        await database.transact(lambda conn: backend.inserts(domains, existing).run(conn))
        rows = [{"domain": d, "consecutive_failures": 0, "in_flight": 0} for d in names]
        await database.transact(
            lambda conn: backend.inserts(domains, rows, skip_existing=True).run(conn)
        )

        bumps = [
            {
                "d": d,
                "n": i,
                "reason": None if i % 3 else f"because {i}",
                "until": None if i % 2 else T0 + timedelta(seconds=i),
            }
            for i, d in enumerate(names)
        ]
        await database.transact(lambda conn: backend.updates(BUMP, bumps).run(conn))

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


def _domains_where(condition: sa.ColumnElement[bool]) -> sa.Select[Any]:
    return sa.select(
        domains.c.domain,
        domains.c.in_flight,
        domains.c.paused_until,
        domains.c.pause_reason,
        (domains.c.in_flight > 1).label("busy"),
    ).where(domains.c.domain.in_(sa.bindparam("names", expanding=True)), condition)


SOME_DOMAINS = _domains_where(sa.true())
SOME_DOMAINS_IN_TWO = sa.union_all(
    _domains_where(domains.c.in_flight < 2), _domains_where(domains.c.in_flight >= 2)
)


async def test_all_rows_reads_what_a_plain_read_does(database_url):
    """Every row, each value as a plain execute gives it (timestamps with their zone and
    microseconds, booleans, nulls, integers, text with quotes, backslashes and non-ASCII),
    of a SELECT and of a UNION ALL; an empty list when nothing matches."""
    database = Database(database_url)
    backend = database.backend
    rows = [
        {
            "domain": f"d{i}.test",
            "consecutive_failures": 0,
            "in_flight": i,
            "paused_until": None if i % 2 else T0 + timedelta(seconds=i, microseconds=7),
            "pause_reason": None if i % 3 else f'"{i}" \\ é ✓ [1, {{}}]',
        }
        for i in range(5)
    ]
    names = {"names": [row["domain"] for row in rows]}

    def read(conn: sa.Connection) -> list[Any]:
        return [
            (
                sorted(backend.all_rows(conn, statement, params)),
                sorted(conn.execute(statement, params)),
            )
            for statement in (SOME_DOMAINS, SOME_DOMAINS_IN_TWO)
            for params in (names, {"names": ["none.test"]})
        ]

    try:
        await database.transact(lambda conn: backend.inserts(domains, rows).run(conn))
        reads = await database.transact(read)
    finally:
        await database.dispose()
    for packed, plain in reads:
        assert packed == [tuple(row) for row in plain]
    everything = reads[0][0]
    assert len(everything) == 5
    assert everything[2] == ("d2.test", 2, T0 + timedelta(seconds=2, microseconds=7), None, True)
    assert everything[3] == ("d3.test", 3, None, '"3" \\ é ✓ [1, {}]', True)
    assert [type(value) for value in everything[0]] == [str, int, datetime, str, bool]
    assert reads[1][0] == []


async def test_a_row_without_a_bound_parameter_is_refused(database_url):
    """A missing value is an error, as SQLAlchemy's own executemany makes it, never a null."""
    database = Database(database_url)
    backend = database.backend
    try:
        rows = [{"domain": "a.test", "consecutive_failures": 0, "in_flight": 0}]
        await database.transact(lambda conn: backend.inserts(domains, rows).run(conn))
        bumps = [{"d": "a.test", "n": 1, "reason": None}]  # no "until"
        with pytest.raises((KeyError, sa.exc.StatementError)):
            await database.transact(lambda conn: backend.updates(BUMP, bumps).run(conn))
        async with database.read() as conn:
            in_flight = (await conn.execute(sa.select(domains.c.in_flight))).scalar_one()
    finally:
        await database.dispose()
    assert in_flight == 0


async def test_a_column_left_out_takes_its_default(database_url):
    """A row without a column that has a default gets the default, as SQLAlchemy's own
    insert gives it; SQLite's compiled statement bound it as null (NOT NULL: refused)."""
    database = Database(database_url)
    backend = database.backend
    try:
        rows = [{"domain": f"d{i}.test"} for i in range(3)]
        await database.transact(lambda conn: backend.inserts(domains, rows).run(conn))
        await database.transact(
            lambda conn: backend.inserts(domains, [{"domain": "e.test"}], True).run(conn)
        )
        async with database.read() as conn:
            stored = (
                await conn.execute(
                    sa.select(domains.c.domain, domains.c.consecutive_failures, domains.c.in_flight)
                )
            ).all()
    finally:
        await database.dispose()
    assert sorted(stored) == [(f"{d}.test", 0, 0) for d in ("d0", "d1", "d2", "e")]


async def test_a_submit_does_not_queue_behind_writes_to_its_domain(pg_url):
    """PostgreSQL: every claim and record updates the rows of its jobs' domain and tenant.
    A submit to that domain inserts them unless they exist; ON CONFLICT DO NOTHING alone
    waits for the updating transaction to end, so POST /jobs would queue behind the
    worker's transactions on a busy domain."""
    database = Database(pg_url)
    store = JobStore(database, clock=lambda: T0)
    new = NewJob(url="http://a.test/", domain="a.test", tenant="t", max_attempts=3)
    try:
        await store.submit([new])
        async with database.engine.begin() as worker:
            await worker.execute(sa.update(domains).values(in_flight=domains.c.in_flight + 1))
            await worker.execute(sa.update(tenants).values(last_served_at=T0))
            await asyncio.wait_for(store.submit([new, new]), timeout=10)
        async with database.read() as conn:
            count = (await conn.execute(sa.select(sa.func.count()).select_from(jobs))).scalar()
    finally:
        await database.dispose()
    assert count == 3


async def test_a_submit_is_one_round_trip_on_postgresql(pg_url, monkeypatch):
    """Jobs, their domains and tenants, and the NOTIFY: one statement, and no transaction
    begun around it (asyncpg's `transaction()` is how SQLAlchemy sends BEGIN)."""
    database = Database(pg_url)
    store = JobStore(database, clock=lambda: T0)
    sent: list[str] = []
    sa.event.listen(
        database.engine.sync_engine, "before_cursor_execute", lambda *a: sent.append(a[2])
    )
    transaction = asyncpg.Connection.transaction

    def begin(self: asyncpg.Connection, **kwargs: Any) -> Any:
        sent.append("BEGIN")
        return transaction(self, **kwargs)

    monkeypatch.setattr(asyncpg.Connection, "transaction", begin)
    new = [
        NewJob(url=f"http://{d}.test/", domain=f"{d}.test", tenant=d, max_attempts=3)
        for d in "abcab"
    ]
    woken = asyncio.Event()
    try:
        async with database.read() as conn:
            listener = (await conn.get_raw_connection()).driver_connection
            assert listener is not None
            await listener.add_listener(NOTIFY_CHANNEL, lambda *_: woken.set())
            sent.clear()
            await store.submit(new)
            submit_sent = list(sent)
            await asyncio.wait_for(woken.wait(), timeout=10)
        async with database.read() as conn:
            counts = [
                (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar()
                for table in (jobs, domains, tenants)
            ]
    finally:
        await database.dispose()
    assert len(submit_sent) == 1 and "INSERT" in submit_sent[0], submit_sent
    assert counts == [5, 3, 3]
