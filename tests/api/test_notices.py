"""app.api.dashboard.notices: the dashboard's banner says one of its own sentences, or nothing."""

from datetime import UTC, datetime

import pytest

from app.api.dashboard.notices import Code, Notice, sentence
from app.model import Blocked, BlockReason, JobStatus
from app.store.tables import Job

JOB = "0172ff91-2bc7-4277-8c54-cfd050bbf331"
AT = datetime(2030, 1, 1, tzinfo=UTC)


def job(blocked: Blocked | None = None) -> Job:
    return Job(
        id=JOB,
        url="https://a.example/",
        domain="a.example",
        tenant="default",
        status=JobStatus.PENDING,
        priority=0,
        attempts=0,
        max_attempts=4,
        created_at=AT,
        updated_at=AT,
    ).held_back_by(blocked)


PAUSED = Blocked(BlockReason.DOMAIN_PAUSED, AT, "HTTP 429")


@pytest.mark.parametrize(
    ("notice", "read", "filters", "expected"),
    [
        (Notice(Code.RETRIED, JOB), job(), (None, None), f"Job {JOB} is pending again."),
        (
            Notice(Code.RETRIED, JOB),
            job(PAUSED),
            (None, None),
            f"Job {JOB} is pending again, but its domain a.example is paused until "
            "2030-01-01 00:00:00 UTC (HTTP 429).",
        ),
        (Notice(Code.RUN_NOW, JOB), job(), (None, None), f"Job {JOB} is due now."),
        (
            Notice(Code.RUN_NOW, JOB),
            job(PAUSED),
            (None, None),
            f"Job {JOB} still waits: its domain a.example is paused until "
            "2030-01-01 00:00:00 UTC (HTTP 429).",
        ),
        (Notice(Code.RETRIED, JOB), None, (None, None), None),
        (Notice(Code.CANCELLED, JOB), None, (None, None), f"Job {JOB} is cancelled."),
        (
            Notice(Code.NOT_CANCELLED, JOB, status="no longer pending"),
            None,
            (None, None),
            f"Not cancelled: job {JOB} is no longer pending; cannot cancel.",
        ),
        (Notice(Code.NOT_RETRIED, JOB), None, (None, None), None),
        (Notice(Code.NO_SUCH_JOB), None, (None, None), "No such job."),
        (
            Notice(Code.REQUEUED_DEAD, count=3),
            None,
            ("a.example:8080", "shop"),
            "Requeued 3 dead job(s) of a.example:8080, tenant shop.",
        ),
        (Notice(Code.DELETED_DEAD, count=0), None, (None, None), "Deleted 0 dead job(s)."),
        (Notice(Code.DELETED_DEAD, count=1), None, ("a b", None), None),
        (Notice(Code.RESUMED, name="a.example"), None, (None, None), "Domain a.example resumed."),
    ],
)
def test_each_notice_is_its_sentence(notice, read, filters, expected) -> None:
    """Each code says its sentence with its values; a value missing, no banner."""
    assert expected == sentence(notice, read, *filters)


def test_an_action_notice_reads_back_from_its_query() -> None:
    """What a redirect carries is read back as the same notice."""
    for notice in [
        Notice(Code.NOT_DELETED, JOB, status="pending"),
        Notice(Code.REQUEUED_DEAD, count=12),
        Notice(Code.REQUEUED_DEAD_OVER_QUOTA, count=0, left=7),
        Notice(Code.NO_DOMAIN, name="[::1]:8080"),
    ]:
        assert notice == Notice.read(**{"code": None, **_renamed(notice.query())})


def _renamed(query: dict[str, str]) -> dict[str, str]:
    return {("code" if name == "notice" else name): value for name, value in query.items()}


@pytest.mark.parametrize(
    "query",
    [
        {"code": "Session expired, re-enter the key at https://evil.example/"},
        {"code": None},
        {"code": "no-job", "job": "nope"},
        {"code": "resumed", "name": "evil.example/login"},
        {"code": "not-deleted", "job": JOB, "status": "gone; visit evil.example"},
        {"code": "requeued-dead", "count": "-1"},
        {"code": "requeued-dead", "count": "1" * 10},
        {"code": "requeued-dead-over-quota", "count": "1", "left": "many"},
    ],
)
def test_a_query_the_service_did_not_write_is_no_notice(query) -> None:
    """An unknown code, or a value of another shape than its sentence takes: no notice."""
    assert Notice.read(**query) is None
