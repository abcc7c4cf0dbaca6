"""The record's SQL that both backends run as written (`app.store.record` says the steps).

The fence, each kind of job update, the versions dropped, the failure streaks read; and
the updates that free a domain's slots and a tenant's jobs in flight, which each backend's
`record` module runs its own way (`free_slots`).
"""

from typing import Any

import sqlalchemy as sa

from app.model import JobStatus
from app.store.dialect import floor_minus, lock_rows
from app.store.tables import UTCDateTime, contents, domains, jobs, status_is, tenants


def _fenced() -> sa.ColumnElement[bool]:
    """The fence of every write: the job still runs under this very claim."""
    return sa.and_(
        jobs.c.id == sa.bindparam("job"),
        _lease_id() == sa.bindparam("lease"),
        status_is(JobStatus.RUNNING),
    )


def _lease_id() -> sa.ColumnElement[str]:
    # Jobs running since before migration 0005 have no lease id: their reaper's lease says "".
    return sa.func.coalesce(jobs.c.lease_id, "")


FENCE = lock_rows(
    sa.select(
        jobs.c.id,
        _lease_id().label("lease_id"),
        jobs.c.callback_url.is_not(None).label("hooked"),
    ).where(jobs.c.id.in_(sa.bindparam("ids", expanding=True)), status_is(JobStatus.RUNNING))
)
"""The running jobs among `ids`, locked, with their lease ids: which outcomes are held."""

STREAKS = sa.select(domains.c.domain, domains.c.consecutive_failures).where(
    domains.c.domain.in_(sa.bindparam("domains", expanding=True))
)

_LEFT_RUNNING: dict[str, Any] = {
    "lease_expires_at": None,
    "worker_id": None,
    "lease_id": None,
    "updated_at": sa.bindparam("now"),
}

SUCCEED = (
    sa.update(jobs)
    .where(_fenced())
    .values(
        status=JobStatus.SUCCEEDED.value,
        result_http_status=sa.bindparam("http_status"),
        result_final_url=sa.bindparam("final_url"),
        result_content_type=sa.bindparam("content_type"),
        result_bytes=sa.bindparam("bytes"),
        result_sha256=sa.bindparam("sha256"),
        result_title=sa.bindparam("title"),
        result_text_length=sa.bindparam("text_length"),
        result_metadata=sa.bindparam("page"),
        result_etag=sa.bindparam("etag"),
        result_last_modified=sa.bindparam("last_modified"),
        result_text_sha256=sa.bindparam("text_sha256"),
        content_version=sa.bindparam("version"),
        changed_at=sa.bindparam("now"),
        refresh_at=sa.bindparam("refresh_at"),
        finished_at=sa.bindparam("now"),
        **_LEFT_RUNNING,
    )
)

CONFIRM = (
    sa.update(jobs)
    .where(_fenced())
    .values(
        status=JobStatus.SUCCEEDED.value,
        result_etag=sa.bindparam("etag"),
        result_last_modified=sa.bindparam("last_modified"),
        result_bytes=sa.func.coalesce(
            sa.bindparam("bytes", type_=sa.BigInteger), jobs.c.result_bytes
        ),
        result_sha256=sa.func.coalesce(
            sa.bindparam("sha256", type_=sa.String), jobs.c.result_sha256
        ),
        refresh_at=sa.bindparam("refresh_at"),
        finished_at=sa.bindparam("now"),
        **_LEFT_RUNNING,
    )
)
"""A refresh found the content as stored: succeeded again, its validators renewed, and the
body's size and hash those of the answer (a 200's), so the same body next time is known
without extracting it; the stored version stays as it was."""

DROP_VERSIONS = sa.delete(contents).where(
    contents.c.job_id == sa.bindparam("job"), contents.c.version <= sa.bindparam("upto")
)
"""The versions of a job older than the INGEST_CONTENT_VERSIONS kept."""

_MOVE_ON = {
    "status": sa.bindparam("status"),
    "retry_after": sa.bindparam("retry_after"),
    "dead_reason": sa.bindparam("dead_reason"),
    "finished_at": sa.bindparam("finished_at"),
    "attempts": jobs.c.attempts - sa.bindparam("given_back"),
    "deferrals": jobs.c.deferrals + sa.bindparam("deferred"),
    **_LEFT_RUNNING,
}

FAIL = (
    sa.update(jobs)
    .where(_fenced())
    .values(
        last_error_kind=sa.bindparam("error_kind"),
        last_error_type=sa.bindparam("error_type"),
        last_error_message=sa.bindparam("error_message"),
        last_error_http_status=sa.bindparam("error_http_status"),
        last_error_at=sa.bindparam("now"),
        **_MOVE_ON,
    )
)

HAND_BACK = sa.update(jobs).where(_fenced()).values(**_MOVE_ON)
"""A move on that keeps the job's last error: a shutdown's hand-back has none to add."""


def free_slots_update(
    domain: sa.ColumnElement[str],
    freed: sa.ColumnElement[int],
    reset: sa.ColumnElement[bool],
    streak: sa.ColumnElement[int],
) -> sa.Update:
    """`freed` of `domain`'s slots freed; its failure streak `streak`, or `streak` more
    unless `reset`."""
    return (
        sa.update(domains)
        .where(domains.c.domain == domain)
        .values(
            in_flight=floor_minus(domains.c.in_flight, freed),
            consecutive_failures=sa.case(
                (reset, streak), else_=domains.c.consecutive_failures + streak
            ),
            updated_at=sa.bindparam("now", type_=UTCDateTime),
        )
    )


def free_tenants_update(tenant: sa.ColumnElement[str], freed: sa.ColumnElement[int]) -> sa.Update:
    """`freed` of `tenant`'s jobs in flight freed."""
    return (
        sa.update(tenants)
        .where(tenants.c.tenant == tenant)
        .values(in_flight=floor_minus(tenants.c.in_flight, freed))
    )
