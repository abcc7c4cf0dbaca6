"""The job a submit returns (`app.store.jobs.rows._submitted`, a copy of a blank job) is the
job a read builds from the same row (`_job`)."""

from datetime import UTC, datetime

import pytest

from app.model import CallbackContent, NewJob
from app.rules.url_key import url_key
from app.store.jobs.rows import _job, _row, _submitted

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NEW = [
    NewJob(url="http://a.test/", domain="a.test", tenant="default", max_attempts=3),
    NewJob(
        url="http://b.test:8080/x",
        domain="b.test:8080",
        tenant="t",
        max_attempts=7,
        priority=-4,
        not_before=datetime(2027, 1, 1, tzinfo=UTC),
        metadata={"k": [1, "\ud800"]},
        callback_url="http://c.test/hook",
        callback_content=CallbackContent.TEXT,
        idempotency_key="key",
        fingerprint="f" * 64,
        refresh_every=60,
    ),
]


@pytest.mark.parametrize("new", NEW)
def test_a_submitted_job_is_the_job_its_row_reads_as(new):
    row = _row(new, NOW)
    key = url_key(new.url)
    read, submitted = _job(row | {"url_key": key}), _submitted(row, key)
    assert list(read.__dict__.items()) == list(submitted.__dict__.items())
    assert read.model_fields_set == submitted.model_fields_set
    assert read.__pydantic_private__ == submitted.__pydantic_private__
    assert read.model_dump_json() == submitted.model_dump_json()
    assert submitted.meta is None or submitted.meta["k"][1] == "\ufffd"  # shown, as read


def test_each_submitted_job_is_its_own():
    """A copy: holding one back, or changing it, leaves the next one as it was."""
    row = _row(NEW[0], NOW)
    first = _submitted(row, "k")
    first.held_back_by(None)
    first.priority = 99
    assert (0, None) == (_submitted(row, "k").priority, _submitted(row, "k").blocked_by)
