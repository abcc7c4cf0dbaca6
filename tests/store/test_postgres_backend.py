"""app.store.backends.postgres: what a PostgreSQL URL says of a transaction pooler (no database)."""

import logging

import pytest

from app.store.backends import backend_for
from app.store.backends.postgres import PostgresBackend


def test_pooler_transaction_is_ingests_own_and_not_the_drivers():
    """`?pooler=transaction` turns the pooler mode on and is not passed to asyncpg; the
    engine then caches no statement (SQLAlchemy's cache off in the URL it connects with)."""
    backend = backend_for("postgresql://u@h:6432/db?pooler=transaction")
    assert isinstance(backend, PostgresBackend)
    engine = backend.create_engine(pool_size=1)
    assert backend.transaction_pooler
    assert "pooler" not in backend.url.query
    assert {"prepared_statement_cache_size": "0"} == dict(engine.url.query)
    direct = backend_for("postgresql://u@h:5432/db")
    assert isinstance(direct, PostgresBackend) and not direct.transaction_pooler
    assert {} == dict(direct.create_engine(pool_size=1).url.query)


def test_an_unknown_pooler_is_refused():
    with pytest.raises(ValueError, match="only pooler=transaction"):
        backend_for("postgresql://u@h/db?pooler=session")


async def test_through_a_pooler_without_a_listen_url_workers_poll(caplog):
    """No LISTEN through a transaction pooler (it would hold a server connection's session):
    the block runs, says once that workers poll, and opens no connection."""
    backend = backend_for("postgresql://u@127.0.0.1:9/db?pooler=transaction")
    assert isinstance(backend, PostgresBackend)
    with caplog.at_level(logging.INFO):
        async with backend.listen(lambda _: None):
            pass
    assert ["workers poll for new jobs"] == [
        r.getMessage().rsplit("; ", 1)[-1] for r in caplog.records if "LISTEN off" in r.getMessage()
    ]
