"""The cursor of a page of jobs: the last job's creation time and id, opaque to clients.

Encodes and decodes only; `BadCursor` for one this service did not return. The list that
pages with it is `JobReads.list` (`app.store.jobs.reads`).
"""

import base64
import binascii
from datetime import UTC, datetime

from app.store.jobs.errors import BadCursor
from app.store.tables import Job, is_job_id


def encode_cursor(job: Job) -> str:
    raw = f"{job.created_at.isoformat()}|{job.id}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        created, job_id = raw.split("|", 1)
        parsed = datetime.fromisoformat(created)
        # An offset can carry the time past year 9999 (or before year 1) in UTC.
        created_at = parsed.astimezone(UTC) if parsed.tzinfo else None
    except (binascii.Error, UnicodeDecodeError, ValueError, OverflowError) as exc:
        raise BadCursor("cursor is not one this service returned") from exc
    if created_at is None or not is_job_id(job_id):
        raise BadCursor("cursor is not one this service returned")
    return created_at, job_id
