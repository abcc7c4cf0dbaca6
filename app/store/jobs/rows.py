"""A job's row, both ways: the row a submit inserts, the `Job` a read builds from a row.

Pure: builds values, issues no SQL. The statements that read the rows are in
`app.store.jobs.queries`; the columns in `app.store.tables`.
"""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from app.model import CallbackContent, JobStatus, NewJob
from app.rules.url_key import url_hash, url_key
from app.store.tables import Job, new_job_id
from app.text.safe_strings import shown


def _job(columns: Mapping[Any, Any]) -> Job:
    values = dict(columns)
    # Rows stored before the API refused them may hold lone surrogates (or NaN, on SQLite)
    # in their metadata: shown with U+FFFD (null) so no list or read of them can fail.
    values["meta"] = shown(values.pop("metadata"))
    # Not validated, as the table class was not: what the database holds is what it shows.
    return Job.model_construct(**values)


_REQUIRED: dict[str, Any] = {
    name: None for name, field in Job.model_fields.items() if field.is_required()
}
_UNSET_JOB = Job.model_construct(**_REQUIRED)
"""A job of default values, its fields in their order (the required ones None): what
`_submitted` copies."""


def _submitted(row: dict[str, Any], url_key: str) -> Job:
    """`_job(row)` for a row a submit inserted, the same job built for less: a copy of
    `_UNSET_JOB` with the row's values, not `model_construct` walking every field and
    default (docs/design/store.md)."""
    values = dict(row)
    values["meta"] = shown(values.pop("metadata"))
    values["url_key"] = url_key
    return _UNSET_JOB.model_copy(update=values)


def _key_of(new: NewJob) -> str:
    """The key of the job's URL: as the caller made it, or made now."""
    return new.url_key if new.url_key is not None else url_key(new.url)


def _url_row(row: dict[str, Any], key: str) -> dict[str, Any]:
    """The `job_urls` row of the job inserted as `row`, its URL's key `key`."""
    return {"job_id": row["id"], "tenant": row["tenant"], "url_hash": url_hash(key), "url_key": key}


def _row(new: NewJob, now: datetime, unique_key: int | None = None) -> dict[str, Any]:
    """The row of a job `new` asks for, submitted at `now`; `unique_key`: the digest of its
    URL's key if it holds it (`JobFields.unique_key`)."""
    return {
        "id": new_job_id(),
        "url": new.url,
        "domain": new.domain,
        "tenant": new.tenant,
        "status": JobStatus.PENDING.value,
        "priority": new.priority,
        "attempts": 0,
        "max_attempts": new.max_attempts,
        "deferrals": 0,
        "retry_after": new.not_before if new.not_before and new.not_before > now else None,
        "metadata": new.metadata,
        "callback_url": new.callback_url,
        # Null for none, as every job submitted before migration 0008 says.
        "callback_content": (
            None if new.callback_content is CallbackContent.NONE else new.callback_content.value
        ),
        "unique_key": unique_key,
        "idempotency_key": new.idempotency_key,
        "idempotency_fingerprint": new.fingerprint,
        "refresh_every": new.refresh_every,
        "created_at": now,
        "updated_at": now,
    }


def _fresh_budget(now: datetime) -> dict[str, Any]:
    """A retried job's values: pending, a fresh budget; its URL key no longer held, for
    another job may hold it by now (`JobFields.unique_key`)."""
    return {
        "status": JobStatus.PENDING,
        "attempts": 0,
        "deferrals": 0,
        "retry_after": None,
        "dead_reason": None,
        "finished_at": None,
        "unique_key": None,
        "updated_at": now,
    }
