"""The parts of the statements on jobs that the reads and the commands share.

Builds SQLAlchemy statements and their filters; executes nothing. Every read selects a job
with its domain's and tenant's rows (`_shown`), so a pending job can say what holds it back.
"""

from typing import Any, TypeVar

import sqlalchemy as sa

from app.model import JobStatus
from app.rules.url_key import url_hash
from app.store.tables import attempts, domains, job_urls, jobs, status_is, tenants
from app.text.safe_strings import storable

AnySelect = TypeVar("AnySelect", bound=sa.Select[*tuple[Any, ...]])

_DOMAIN_STATE = (
    domains.c.paused_until.label("domain_paused_until"),
    domains.c.pause_reason.label("domain_pause_reason"),
    domains.c.in_flight.label("domain_in_flight"),
    domains.c.next_start_at.label("domain_next_start_at"),
    tenants.c.in_flight.label("tenant_in_flight"),
)


def _shown() -> sa.Select[Any]:
    """Jobs with their URL's key and their domain's and tenant's state: outer joins on the
    rows' primary keys."""
    return sa.select(jobs, job_urls.c.url_key, *_DOMAIN_STATE).select_from(
        jobs.outerjoin(job_urls, job_urls.c.job_id == jobs.c.id)
        .outerjoin(domains, domains.c.domain == jobs.c.domain)
        .outerjoin(tenants, tenants.c.tenant == jobs.c.tenant)
    )


def _of_url(stmt: AnySelect, key: str, tenant: str | None) -> AnySelect:
    """`stmt` (a `_shown()` query) of the jobs whose URL's key is `key` (of `tenant`, when
    given), found through `ix_job_urls_key`."""
    stmt = stmt.where(job_urls.c.url_hash == url_hash(key), job_urls.c.url_key == key)
    return stmt if tenant is None else stmt.where(job_urls.c.tenant == tenant)


def _history(job_id: str) -> sa.CompoundSelect[Any]:
    """`job_id`'s attempts in order (`JobStore.attempts`): its rows in `attempts`, then the
    running attempt as its job's row tells it, if it runs. Each numbered by its place, not
    by its stored `number` (its attempt of the budget then in force: that starts again at
    1 with each retry and refresh, and repeats after an attempt that gave its budget back)."""
    place = sa.func.row_number().over(order_by=attempts.c.id)
    ended = sa.select(
        *(place.label("number") if column.name == "number" else column for column in attempts.c)
    ).where(attempts.c.job_id == job_id)
    so_far = sa.select(sa.func.count()).where(attempts.c.job_id == job_id).scalar_subquery()
    running = {
        "job_id": jobs.c.id,
        "number": so_far + 1,
        "worker_id": sa.func.coalesce(jobs.c.worker_id, ""),
        "started_at": jobs.c.started_at,
    }
    now = sa.select(
        *(running.get(column.name, sa.null()).label(column.name) for column in attempts.c)
    ).where(jobs.c.id == job_id, status_is(JobStatus.RUNNING), jobs.c.started_at.is_not(None))
    # The running attempt has no row, so no id: last.
    return sa.union_all(ended, now).order_by(sa.column("id").asc().nulls_last())


def _filtered(stmt: AnySelect, domain: str | None, tenant: str | None) -> AnySelect:
    if domain:
        stmt = stmt.where(jobs.c.domain == domain.lower())
    if tenant:
        stmt = stmt.where(jobs.c.tenant == tenant)
    return stmt


_ID_SHAPE = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"


def _starts_an_id(text: str) -> bool:
    """True for the start of a lower-case UUID: hex digits, hyphens where a UUID has them."""
    return 0 < len(text) <= len(_ID_SHAPE) and all(
        char == "-" if shape == "-" else char in "0123456789abcdef"
        for char, shape in zip(text, _ID_SHAPE, strict=False)
    )


def _of(domain: str | None, tenant: str | None) -> list[sa.ColumnElement[bool]]:
    """The conditions of a bulk action's filters: jobs of `domain`, of `tenant`."""
    conditions = [jobs.c.domain == domain.lower()] if domain else []
    return conditions + ([jobs.c.tenant == tenant] if tenant is not None else [])


def _storable(*filters: str | None) -> bool:
    """False if a filter holds what no row can (NUL, a lone surrogate): it matches nothing,
    and PostgreSQL would fail on it rather than say so."""
    return all(storable(value) for value in filters if value)
