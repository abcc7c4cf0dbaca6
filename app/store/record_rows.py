"""The rows an outcome writes beside its job's update: its attempt's row in the history, its
last error, its page's metadata; every string made one both databases hold.

Pure: values in, rows out (`app.store.record` writes them). An outcome's strings come from
the remote side, and one a database refuses would fail the whole batch (`storable`).
"""

from collections.abc import Sequence
from dataclasses import fields
from datetime import datetime
from typing import Any, assert_never

from app.model import (
    Confirmed,
    Deferred,
    Died,
    Expired,
    Failure,
    Finds,
    HandedBack,
    NotKept,
    Outcome,
    PageLink,
    PageMetadata,
    Retried,
    Succeeded,
)
from app.rules.url_key import url_hash
from app.text.safe_strings import storable_text


def storable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with every string made one both databases hold (`storable_text`): an
    outcome's strings come from the remote side (a page's text and title, its headers, an
    error's message), and one that a database refuses would fail the whole batch."""
    return [
        {
            key: storable_text(value) if isinstance(value, str) else value
            for key, value in row.items()
        }
        for row in rows
    ]


_PAGE_FIELDS = tuple(f.name for f in fields(PageMetadata))


def page_json(metadata: PageMetadata) -> dict[str, Any]:
    """The page's metadata as the JSON object `jobs.result_metadata` holds, every string
    made storable (`storable_text`): `storable` sees only a row's top-level strings."""
    page: dict[str, Any] = {}
    for name in _PAGE_FIELDS:
        value = getattr(metadata, name)
        if isinstance(value, str):
            value = storable_text(value)
        elif isinstance(value, tuple):
            value = [storable_text(item) for item in value]
        page[name] = value
    return page


def links_json(links: Sequence[PageLink], cut: int) -> dict[str, Any]:
    """A page's links as `job_contents.links` holds them (an object: both databases' JSON
    columns take one alike), every string made storable, with the count of those cut."""
    items = [
        {
            "url": storable_text(link.url),
            "text": storable_text(link.text),
            "internal": link.internal,
        }
        for link in links
    ]
    return {"items": items, "cut": cut}


def frontier_rows(finds: Finds, now: datetime, round: int | None = None) -> list[dict[str, Any]]:
    """The `crawl_urls` rows of the URLs `finds` adds to its crawl, new, found by `round`
    (None: the round under way, which `app.store.crawl_rounds.FOUND` writes after)."""
    return [
        {
            "crawl_id": finds.crawl_id,
            "kind": found.kind.value,
            "url_hash": url_hash(found.url),
            "url": storable_text(found.url),
            "state": found.state.value,
            "depth": found.depth,
            "source": found.via.value,
            "found_on": None if found.found_on is None else storable_text(found.found_on),
            "lastmod": found.lastmod,
            "first_round": round,
            "round": round,
            "created_at": now,
        }
        for found in finds.urls
    ]


def tally_rows(finds: Finds) -> list[dict[str, Any]]:
    """The `crawl_tallies` rows of the URLs `finds` left out, by reason."""
    return [{"crawl_id": finds.crawl_id, "name": name, "n": n} for name, n in finds.left_out if n]


def last_error(failure: Failure) -> dict[str, Any]:
    return {
        "error_kind": failure.kind.value,
        "error_type": failure.type,
        "error_message": failure.message,
        "error_http_status": failure.http_status,
    }


def history_row(outcome: Outcome, now: datetime) -> dict[str, Any]:
    """The attempt's row in the history, as it ended."""
    lease = outcome.lease
    failure: Failure | None = None
    message: str | None = None
    http_status: int | None = None
    # Null only when the attempt ended the job: a job due again at once says when (now),
    # so the dashboard tells a retried attempt from a fatal one by this column alone.
    next_retry_at: datetime | None = None
    match outcome:
        case Succeeded():
            http_status = outcome.fetched.http_status
        case Confirmed():
            http_status = outcome.unmodified.http_status
        case NotKept():
            http_status, message = outcome.http_status, outcome.message
        case Retried() | Deferred():
            failure, next_retry_at = outcome.failure, outcome.retry_at
        case Died():
            failure = outcome.failure
        case HandedBack():
            message, next_retry_at = outcome.message, now
        case Expired():
            failure, next_retry_at = outcome.failure, None if outcome.dead else now
        case _:
            assert_never(outcome)
    return {
        "job_id": lease.id,
        "number": lease.attempt,
        "worker_id": lease.worker_id,
        "started_at": lease.claimed_at,
        "queue_lag_ms": _lag_ms(lease.due_at, lease.claimed_at),
        "finished_at": now,
        "duration_ms": outcome.duration_ms,
        "outcome": outcome.ended.value,
        "error_type": None if failure is None else failure.type,
        "message": message if failure is None else failure.message,
        "http_status": http_status if failure is None else failure.http_status,
        "next_retry_at": next_retry_at,
    }


def _lag_ms(due_at: datetime | None, claimed_at: datetime) -> int | None:
    """How long a job had been due when claimed, for the dashboard's queue lag; never below
    0 (another host's clock may run ahead). Unknown for a lease taken back from a worker
    gone silent (`MaintenanceStore.overdue` reads no due time)."""
    if due_at is None:
        return None
    return max(0, int((claimed_at - due_at).total_seconds() * 1000))
