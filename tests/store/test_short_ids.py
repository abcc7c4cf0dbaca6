"""A job named by the start of its id (`JobStore.match_id`), on both backends."""

import asyncio

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from app.cli import cli
from app.clock import utc_now
from app.model import NewJob
from app.store.database import Database
from app.store.jobs import JobStore
from app.store.jobs.errors import AmbiguousId, JobNotFound
from app.store.tables import jobs
from tests.cli.test_cli import one_line_error

IDS = [
    "abcd0000-0000-4000-8000-000000000001",
    "abcd0000-1111-4000-8000-000000000002",
    "abce0000-0000-4000-8000-000000000003",
]


async def jobs_with_ids(database: Database) -> JobStore:
    """A store holding three jobs with the ids of IDS (two share `abcd0000-`)."""
    store = JobStore(database, utc_now)
    made = await store.submit([NewJob("http://a.test/", "a.test", "default", 4)] * len(IDS))

    def rename(conn: sa.Connection) -> None:
        for job, new_id in zip(made, IDS, strict=True):
            conn.execute(sa.update(jobs).where(jobs.c.id == job.id).values(id=new_id))

    await database.transact(rename)
    return store


async def test_a_prefix_names_the_one_job_it_starts(database_url):
    """A unique start (any case, up to the whole id) names its job; a shared one is
    ambiguous; a start no id has, or text no id can start with, names none."""
    database = Database(database_url)
    try:
        store = await jobs_with_ids(database)
        matched = {
            prefix: await store.match_id(prefix)
            for prefix in ["abcd0000-0", "ABCD0000-1", "abce", IDS[0], IDS[1][:-1]]
        }
        for prefix in ["a", "abcd", "abcd0000", "abcd0000-"]:
            with pytest.raises(AmbiguousId):
                await store.match_id(prefix)
        for prefix in [
            "abcc",
            "abcf",
            "b",
            "",
            "abcd00000",
            "ab%",
            "a_",
            "abcd0000_",
            IDS[0] + "0",
        ]:
            with pytest.raises(JobNotFound):
                await store.match_id(prefix)
    finally:
        await database.dispose()
    assert {
        "abcd0000-0": IDS[0],
        "ABCD0000-1": IDS[1],
        "abce": IDS[2],
        IDS[0]: IDS[0],
        IDS[1][:-1]: IDS[1],
    } == matched


def test_an_ambiguous_prefix_is_one_line(database_url, monkeypatch, tmp_path):
    """Every command that takes an id says so when its start is shared: exit 1."""

    async def setup() -> None:
        database = Database(database_url)
        try:
            await jobs_with_ids(database)
        finally:
            await database.dispose()

    asyncio.run(setup())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INGEST_DATABASE_URL", database_url)
    for command in ["show", "retry", "cancel", "delete"]:
        result = CliRunner().invoke(cli, ["jobs", command, "abcd"])
        assert 1 == result.exit_code, command
        assert "error: ambiguous: at least 2 jobs start with abcd (give more of the id)" == (
            one_line_error(result)
        )
