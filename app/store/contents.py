"""Fetched bodies and their text: written with a job's success, read by the API.

`save` runs inside the queue's success transaction, so a succeeded job always has its
content and a job that did not succeed never has any. Retention deletes the content with
its job (app.store.retention; the foreign key cascades).
"""

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from app.fetcher import FetchResult
from app.store.database import Database
from app.store.tables import Job, JobContent, is_job_id

contents = JobContent.__table__
jobs = Job.__table__


@dataclass(frozen=True)
class Content:
    """What is stored for a job. `status` is None when there is no such job."""

    status: str | None
    content_type: str | None = None
    data: bytes | str | None = None
    """The bytes or the text, as asked; None until the job succeeded."""


async def save(conn: AsyncConnection, job_id: str, result: FetchResult, now: datetime) -> None:
    """Store a succeeded fetch's body and text (replacing any earlier ones of the job)."""
    await conn.execute(sa.delete(contents).where(contents.c.job_id == job_id))
    await conn.execute(
        sa.insert(contents).values(
            job_id=job_id,
            content=result.body,
            content_type=result.content_type,
            text=result.text,
            text_length=result.text_length,
            stored_at=now,
        )
    )


class ContentStore:
    def __init__(self, database: Database) -> None:
        self.db = database

    async def get(self, job_id: str, tenant: str | None = None, *, text: bool) -> Content:
        """The job's stored text (`text=True`) or bytes, with its status and content type.

        A job of another tenant than `tenant` (when given) is no job.
        """
        if not is_job_id(job_id):
            return Content(None)
        column = contents.c.text if text else contents.c.content
        stmt = (
            sa.select(jobs.c.status, contents.c.content_type, column)
            .select_from(jobs.outerjoin(contents, contents.c.job_id == jobs.c.id))
            .where(jobs.c.id == job_id)
        )
        if tenant is not None:
            stmt = stmt.where(jobs.c.tenant == tenant)
        async with self.db.read() as conn:
            row = (await conn.execute(stmt)).first()
        return Content(None) if row is None else Content(*row)
