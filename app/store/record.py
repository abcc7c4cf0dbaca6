"""Where outcomes are recorded: many finished attempts written in one transaction, as given.

`record` writes what policy decided (`app.model.Outcome`) and computes nothing: no backoff,
no death, no pause. Each outcome is fenced on its lease (`FENCE`: the job still `running`
under the claim's `lease_id`, its row locked), so the late write of an attempt whose lease
was taken back changes nothing. Then one statement per kind of change, whatever the size:
1. the held jobs: status, budget, `retry_after`, result or last error (`SUCCEED`, ...);
2. their attempts written into the history, whole (the claim writes none);
3. succeeded jobs' content as a new version, and what crawls' pages found (their links);
4. webhook deliveries owed for jobs that finished (same transaction, so none is lost);
5. and 6. their domains' slots and failure streaks, then their tenants' jobs in flight
   (`backend.record.free_slots`, each table in name order, as the claim locks them).
Statements are compiled and bound before the transaction opens (`Recording`); the SQL is
`app.store.backends.record_sql`, and `backend.record` where the backends differ.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

import sqlalchemy as sa

from app.model import (
    Confirmed,
    DeadReason,
    Deferred,
    DeliveryEvent,
    Died,
    DomainPause,
    DomainSignal,
    Expired,
    Finds,
    HandedBack,
    JobStatus,
    Lease,
    NotKept,
    Outcome,
    Retried,
    Succeeded,
)
from app.rules.url_key import url_hash
from app.store.backends import Backend
from app.store.backends.record_sql import (
    CONFIRM,
    DROP_VERSIONS,
    FAIL,
    FENCE,
    HAND_BACK,
    STREAKS,
    SUCCEED,
)
from app.store.backends.writes import NewRows, Once, Writes
from app.store.crawls.rounds import FOUND
from app.store.deliveries import owe
from app.store.record_rows import (
    frontier_rows,
    history_row,
    last_error,
    links_json,
    page_json,
    storable,
    tally_rows,
)
from app.store.tables import (
    UTCDateTime,
    attempts,
    contents,
    crawl_tallies,
    crawl_urls,
    domains,
    jobs,
    status_is,
)


@dataclass(frozen=True, slots=True)
class RecordRules:
    """What a record keeps and owes, built once from the settings by the composition root
    (`app.runtime`)."""

    content_versions: int
    """Content versions kept per job (INGEST_CONTENT_VERSIONS): older ones are deleted."""
    webhook_max_attempts: int
    """The attempts a callback owed by a finished job gets (INGEST_WEBHOOK_MAX_ATTEMPTS)."""


@dataclass(frozen=True)
class Recorded:
    """What a `record` call wrote."""

    outcomes: list[Outcome]
    """Those recorded; the others' leases had been taken back, and nothing of them changed."""
    failures: dict[str, int]
    """For each domain an outcome said is failing: its consecutive failures now."""


class Recording:
    """Outcomes to record at `now`, their writes compiled and bound (`_Plan`) before the
    transaction, so SQLite's writer waits for no compile (docs/design/record.md); a job
    keeps `versions` of its content."""

    def __init__(
        self, backend: Backend, outcomes: Sequence[Outcome], now: datetime, versions: int
    ) -> None:
        self.backend = backend
        self.outcomes = list(outcomes)
        self.now = now
        self.versions = versions
        self.plan = _Plan(backend, self.outcomes, now, versions)


def record(conn: sa.Connection, recording: Recording, webhook_max_attempts: int) -> Recorded:
    """In the caller's write transaction: record the outcomes whose leases are still held.
    Only when the fence drops outcomes (their leases were taken back meanwhile) are the
    rest's statements built again, inside."""
    outcomes, now = recording.outcomes, recording.now
    if not outcomes:
        return Recorded([], {})
    tokens = {(o.lease.id, o.lease.lease_id) for o in outcomes}
    rows = recording.backend.all_rows(conn, FENCE, {"ids": sorted(job_id for job_id, _ in tokens)})
    held = {(job_id, lease_id) for job_id, lease_id, _ in rows} & tokens
    hooked = {job_id for job_id, _, is_hooked in rows if is_hooked}
    kept = [o for o in outcomes if (o.lease.id, o.lease.lease_id) in held]
    if not kept:
        return Recorded([], {})
    plan = (
        recording.plan
        if len(kept) == len(outcomes)
        else _Plan(recording.backend, kept, now, recording.versions)
    )
    for writes in plan.writes:
        writes.run(conn)
    if plan.dropped:
        conn.execute(DROP_VERSIONS, plan.dropped)
    for event, ids in plan.finished.items():
        if owed := [job_id for job_id in ids if job_id in hooked]:
            owe(conn, owed, event, now, webhook_max_attempts)
    failures: dict[str, int] = {}
    if plan.failing:
        failures = dict(recording.backend.all_rows(conn, STREAKS, {"domains": plan.failing}))
    return Recorded(kept, failures)


class _Plan:
    """Every statement `record` runs, compiled and bound for these outcomes."""

    def __init__(
        self, backend: Backend, outcomes: list[Outcome], now: datetime, versions: int
    ) -> None:
        self.versions = versions
        self.succeed: list[dict[str, Any]] = []
        self.confirm: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self.fail: list[dict[str, Any]] = []
        self.hand_back: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.contents: list[dict[str, Any]] = []
        self.frontier: list[dict[str, Any]] = []
        self.found: dict[str, set[int]] = {}
        """Per crawl, the digests of the URLs its pages found: found by its round."""
        self.tallies: list[dict[str, Any]] = []
        self.finished: dict[str, list[str]] = defaultdict(list)
        freed: dict[str, int] = defaultdict(int)
        freed_tenants: dict[str, int] = defaultdict(int)
        streaks: dict[str, tuple[bool, int]] = {}
        for outcome in outcomes:
            lease = outcome.lease
            fence = {"job": lease.id, "lease": lease.lease_id, "now": now}
            self._job(outcome, fence, now)
            self.history.append(history_row(outcome, now))
            freed[lease.domain] += 1
            freed_tenants[lease.tenant] += 1
            reset, streak = streaks.get(lease.domain, (False, 0))
            if outcome.domain is DomainSignal.FAILING:
                streaks[lease.domain] = (reset, streak + 1)
            elif outcome.domain is DomainSignal.ANSWERED:
                streaks[lease.domain] = (True, 0)
        self.domains = [
            {"d": d, "freed": n, "reset": reset, "streak": streak, "now": now}
            for d, n in sorted(freed.items())
            for reset, streak in [streaks.get(d, (False, 0))]
        ]
        self.tenants = [{"t": t, "freed": n} for t, n in sorted(freed_tenants.items())]
        self.failing = sorted(
            {o.lease.domain for o in outcomes if o.domain is DomainSignal.FAILING}
        )
        updates = [
            (SUCCEED, self.succeed),
            (CONFIRM, self.confirm),
            (FAIL, self.fail),
            (HAND_BACK, self.hand_back),
        ]
        self.writes: list[Writes] = [
            backend.updates(statement, storable(params)) for statement, params in updates if params
        ]
        self.writes += backend.record.free_slots(self.domains, self.tenants, now, backend.updates)
        # Inserts after the updates: they lock no domain's nor tenant's row. Together: one
        # statement on PostgreSQL.
        new_rows = [
            NewRows(attempts, storable(self.history)),
            NewRows(contents, storable(self.contents), skip_existing=True),
            NewRows(crawl_urls, self.frontier, skip_existing=True),
            NewRows(crawl_tallies, self.tallies),
        ]
        self.writes.append(backend.inserts_together(new_rows))
        self.writes += [
            Once(FOUND, {"crawl": crawl_id, "hashes": sorted(hashes)})
            for crawl_id, hashes in sorted(self.found.items())
            if hashes
        ]

    def _job(self, outcome: Outcome, fence: dict[str, Any], now: datetime) -> None:
        lease = outcome.lease
        match outcome:
            case Succeeded():
                self._succeed(outcome, fence, now)
            case Confirmed():
                self.confirm.append(fence | _confirmed(outcome))
                self._found(outcome.finds, now)
            case NotKept():
                self.confirm.append(
                    fence
                    | {
                        "etag": outcome.etag,
                        "last_modified": outcome.last_modified,
                        "bytes": None,
                        "sha256": None,
                        "refresh_at": outcome.refresh_at,
                    }
                )
            case Retried():
                pending = _moved_on(fence, JobStatus.PENDING, retry_after=outcome.retry_at)
                self.fail.append(pending | last_error(outcome.failure))
            case Deferred():
                deferred = _moved_on(
                    fence, JobStatus.PENDING, retry_after=outcome.retry_at, given_back=1, deferred=1
                )
                self.fail.append(deferred | last_error(outcome.failure))
            case Died():
                given_back = 0 if outcome.spends_attempt else 1
                dead = _dead(fence, now, outcome.reason, given_back)
                self.fail.append(dead | last_error(outcome.failure))
                gone = outcome.reason is DeadReason.GONE
                event = DeliveryEvent.JOB_GONE if gone else DeliveryEvent.JOB_DEAD
                self.finished[event].append(lease.id)
            case HandedBack():
                self.hand_back.append(_moved_on(fence, JobStatus.PENDING, given_back=1))
            case Expired() if outcome.dead:
                dead = _dead(fence, now, DeadReason.LEASE_EXPIRED)
                self.fail.append(dead | last_error(outcome.failure))
                self.finished[DeliveryEvent.JOB_DEAD].append(lease.id)
            case Expired():
                pending = _moved_on(fence, JobStatus.PENDING)
                self.fail.append(pending | last_error(outcome.failure))
            case _:
                assert_never(outcome)

    def _succeed(self, outcome: Succeeded, fence: dict[str, Any], now: datetime) -> None:
        lease, fetched = outcome.lease, outcome.fetched
        version = lease.previous.version + 1 if lease.previous else 1
        page = page_json(fetched.metadata)
        self.succeed.append(
            fence
            | {
                "http_status": fetched.http_status,
                "final_url": fetched.final_url,
                "content_type": fetched.content_type,
                "bytes": fetched.bytes,
                "sha256": fetched.sha256,
                "title": fetched.title,
                "text_length": len(fetched.text),
                "page": page,
                "etag": fetched.etag,
                "last_modified": fetched.last_modified,
                "text_sha256": fetched.text_sha256,
                "version": version,
                "refresh_at": outcome.refresh_at,
            }
        )
        # Markdown that is the text (a plain-text page's) is kept once, as the text.
        as_text = fetched.markdown == fetched.text
        self.contents.append(
            {
                "job_id": lease.id,
                "version": version,
                "tenant": lease.tenant,
                "content": fetched.body,
                "content_type": fetched.content_type,
                "text": fetched.text,
                "markdown": None if as_text else fetched.markdown,
                "markdown_as_text": as_text,
                "text_length": len(fetched.text),
                "text_sha256": fetched.text_sha256,
                "title": fetched.title,
                "page_metadata": page,
                "stored_at": now,
                "links": links_json(fetched.links, fetched.links_cut),
            }
        )
        self._found(outcome.finds, now)
        if version > self.versions:
            self.dropped.append({"job": lease.id, "upto": version - self.versions})
        event = DeliveryEvent.JOB_CHANGED if outcome.changed else DeliveryEvent.JOB_SUCCEEDED
        self.finished[event].append(lease.id)

    def _found(self, finds: Finds | None, now: datetime) -> None:
        """What a crawl's page found: new URLs for its frontier, and its round's finds."""
        if finds is None:
            return
        self.frontier += frontier_rows(finds, now)
        self.tallies += tally_rows(finds)
        found = self.found.setdefault(finds.crawl_id, set())
        found.update(url_hash(url.url) for url in finds.urls)


def _confirmed(outcome: Confirmed) -> dict[str, Any]:
    unmodified, previous = outcome.unmodified, outcome.lease.previous
    etag, last_modified = unmodified.etag, unmodified.last_modified
    # A 304 may leave its validators out: those it answered to still hold.
    if unmodified.http_status == 304 and previous is not None:
        etag = etag or previous.etag
        last_modified = last_modified or previous.last_modified
    return {
        "etag": etag,
        "last_modified": last_modified,
        "bytes": unmodified.bytes,
        "sha256": unmodified.sha256,
        "refresh_at": outcome.refresh_at,
    }


def _moved_on(
    fence: dict[str, Any],
    status: JobStatus,
    retry_after: datetime | None = None,
    given_back: int = 0,
    deferred: int = 0,
) -> dict[str, Any]:
    """A move on's values (`FAIL`, `HAND_BACK`): `given_back` 1 gives the attempt back,
    `deferred` 1 counts a deferral."""
    return fence | {
        "given_back": given_back,
        "deferred": deferred,
        "retry_after": retry_after,
        "dead_reason": None,
        "finished_at": None,
        "status": status.value,
    }


def _dead(
    fence: dict[str, Any], now: datetime, reason: DeadReason, given_back: int = 0
) -> dict[str, Any]:
    return _moved_on(fence, JobStatus.DEAD, given_back=given_back) | {
        "dead_reason": reason.value,
        "finished_at": now,
    }


def extend_leases(conn: sa.Connection, leases: Sequence[Lease], until: datetime) -> set[Lease]:
    """Heartbeat: push out those of `leases` still held (job id and lease id as a pair)."""
    by_token = {(lease.id, lease.lease_id): lease for lease in leases}
    stmt = (
        sa.update(jobs)
        .where(
            # The plain `id IN` lets both databases find the rows by primary key; the pairs
            # alone made them scan every running job.
            jobs.c.id.in_(sorted({lease.id for lease in leases})),
            sa.tuple_(jobs.c.id, jobs.c.lease_id).in_(list(by_token)),
            status_is(JobStatus.RUNNING),
        )
        .values(lease_expires_at=until)
        .returning(jobs.c.id, jobs.c.lease_id)
    )
    return {by_token[row.id, row.lease_id] for row in conn.execute(stmt)}


def pause_domain(conn: sa.Connection, domain: str, pause: DomainPause) -> bool:
    """Pause `domain` until `pause.until`, unless it is paused longer already. Idempotent;
    True if this pause is the one now stored."""
    stmt = (
        sa.update(domains)
        .where(
            domains.c.domain == domain,
            sa.or_(domains.c.paused_until.is_(None), domains.c.paused_until < pause.until),
        )
        .values(paused_until=pause.until, pause_reason=pause.reason)
    )
    return (conn.execute(stmt)).rowcount == 1


def crawl_delay(
    conn: sa.Connection, domain: str, delay: float | None, not_before: datetime | None
) -> None:
    """Keep the Crawl-delay a worker just read of `domain`'s robots.txt, for every claim to
    space the domain's starts by; and push its next start out to `not_before` (the start of
    the fetch that read it, plus the interval), which the claim that started that fetch did
    not know. A later next start stays."""
    values: dict[str, Any] = {"crawl_delay_seconds": delay}
    if not_before is not None:
        at = sa.literal(not_before, UTCDateTime)
        values["next_start_at"] = sa.case(
            (sa.or_(domains.c.next_start_at.is_(None), domains.c.next_start_at < at), at),
            else_=domains.c.next_start_at,
        )
    conn.execute(sa.update(domains).where(domains.c.domain == domain).values(**values))
