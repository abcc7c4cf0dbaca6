"""Where outcomes are recorded: many finished attempts written in one transaction, as given.

`record` writes what policy decided (`app.model.Outcome`) and computes nothing: no backoff,
no death, no pause. Each outcome is fenced on its lease: the job must still be `running`
under the claim's `lease_id`, so the late write of an attempt whose lease was taken back
changes nothing. The rows are read and locked first (`FOR UPDATE` on PostgreSQL; SQLite's
`BEGIN IMMEDIATE` already holds the writer), then written with one statement per kind of
change (`Backend.updates`: an executemany on PostgreSQL, a statement over a table of the
rows on SQLite), so a batch costs the same few round trips whatever its size:

1. the held jobs: status, budget, `retry_after`, result or last error (one statement per
   kind: succeeded, confirmed by a refresh, failed, handed back);
2. their attempts written into the history, whole: the claim writes none, so an attempt
   costs one row's insert (a running attempt is read off its job's row: `JobStore.attempts`);
3. succeeded jobs' bodies, text and Markdown (once, when it is the text) as a new content
   version (their page's metadata goes with step 1), counted in their tenants' bytes kept
   by triggers (`app.store.counts`), and the versions beyond INGEST_CONTENT_VERSIONS deleted
   (the inserts of steps 2 and 3 in one statement on PostgreSQL:
   `Backend.inserts_together`);
4. webhook deliveries owed for jobs that finished (same transaction, so none is lost);
5. their domains: one slot each freed, and the failure streak moved on;
6. their tenants: one job in flight each freed (after the domains, each in name order,
   as the claim locks them: `app.store.claim`; steps 5 and 6 in one statement on
   PostgreSQL: `_free_together`).

Every string an outcome brings from the remote side is bound as one both databases hold
(`app.text.safe_strings.storable_text`): a lone surrogate or a NUL would fail the whole batch.

Every statement is compiled and bound before the transaction opens (`Recording`): the
SQLite writer is held for running them, not for Python work. Only when the fence drops
outcomes (their leases were taken back meanwhile) are the rest's built again inside.

Why one module past 300 lines: one transaction in the steps above; split, its fencing
would be read in pieces.
"""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from app.model import (
    Complete,
    Confirm,
    DeadReason,
    DeliveryEvent,
    DomainPause,
    DomainSignal,
    Failure,
    JobStatus,
    Lease,
    Outcome,
    PageMetadata,
    Reschedule,
    Transition,
)
from app.store.backends import Backend
from app.store.backends.writes import NewRows, Once, Writes
from app.store.deliveries import owe
from app.store.dialect import (
    all_rows,
    binds_lists,
    each_of,
    floor_minus,
    lists_of,
    lock_rows,
    locked_in_order,
)
from app.store.tables import UTCDateTime, attempts, contents, domains, jobs, status_is, tenants
from app.text.safe_strings import storable_text


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


_FENCE = lock_rows(
    sa.select(
        jobs.c.id,
        _lease_id().label("lease_id"),
        jobs.c.callback_url.is_not(None).label("hooked"),
    ).where(jobs.c.id.in_(sa.bindparam("ids", expanding=True)), status_is(JobStatus.RUNNING))
)
"""The running jobs among `ids`, locked, with their lease ids: which outcomes are held."""

_STREAKS = sa.select(domains.c.domain, domains.c.consecutive_failures).where(
    domains.c.domain.in_(sa.bindparam("domains", expanding=True))
)

_LEFT_RUNNING: dict[str, Any] = {
    "lease_expires_at": None,
    "worker_id": None,
    "lease_id": None,
    "updated_at": sa.bindparam("now"),
}

_SUCCEED = (
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

_CONFIRM = (
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

_DROP_VERSIONS = sa.delete(contents).where(
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

_FAIL = (
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

_HAND_BACK = sa.update(jobs).where(_fenced()).values(**_MOVE_ON)
"""A move on that keeps the job's last error: a shutdown's hand-back has none to add."""


def _free_slots(
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


def _free_tenants(tenant: sa.ColumnElement[str], freed: sa.ColumnElement[int]) -> sa.Update:
    """`freed` of `tenant`'s jobs in flight freed."""
    return (
        sa.update(tenants)
        .where(tenants.c.tenant == tenant)
        .values(in_flight=floor_minus(tenants.c.in_flight, freed))
    )


_FREE_SLOTS = _free_slots(
    sa.bindparam("d"),
    sa.bindparam("freed", type_=sa.Integer),
    sa.bindparam("reset", type_=sa.Boolean),
    sa.bindparam("streak", type_=sa.Integer),
)
_FREE_TENANTS = _free_tenants(sa.bindparam("t"), sa.bindparam("freed", type_=sa.Integer))


def _free_together() -> sa.Select[Any]:
    """Steps 5 and 6 in one statement (PostgreSQL, `binds_lists`): the domains' and the
    tenants' updates as data-modifying CTEs over bound lists. Their rows are locked first,
    each table in name order, the domains' before the tenants' (`locked_in_order`), as a
    claim locks them: so a record and a claim never lock them crosswise."""
    slots = locked_in_order(domains.c.domain, "d", "slots")
    owners = locked_in_order(tenants.c.tenant, "t", "owners", after=slots)
    given = each_of(
        "given", d=sa.String(), freed=sa.Integer(), reset=sa.Boolean(), streak=sa.Integer()
    )
    of_tenants = each_of("of_tenants", t=sa.String(), tenant_freed=sa.Integer())
    freed_slots = (
        _free_slots(given.c.d, given.c.freed, given.c.reset, given.c.streak)
        .where(domains.c.domain.in_(sa.select(slots.c.domain)))
        .cte("freed_slots")
    )
    freed_tenants = (
        _free_tenants(of_tenants.c.t, of_tenants.c.tenant_freed)
        .where(tenants.c.tenant.in_(sa.select(owners.c.tenant)))
        .cte("freed_tenants")
    )
    return sa.select(sa.literal(1)).add_cte(slots, freed_slots, owners, freed_tenants)


_FREE_TOGETHER = _free_together()


class Recording:
    """Outcomes to record at `now`, their writes compiled and bound (`_Plan`); a job keeps
    `versions` of its content."""

    def __init__(
        self, backend: Backend, outcomes: Sequence[Outcome], now: datetime, versions: int
    ) -> None:
        self.backend = backend
        self.outcomes = list(outcomes)
        self.now = now
        self.versions = versions
        self.plan = _Plan(backend, self.outcomes, now, versions)


def record(conn: sa.Connection, recording: Recording, webhook_max_attempts: int) -> Recorded:
    """In the caller's write transaction: record the outcomes whose leases are still held."""
    outcomes, now = recording.outcomes, recording.now
    if not outcomes:
        return Recorded([], {})
    tokens = {(o.lease.id, o.lease.lease_id) for o in outcomes}
    rows = all_rows(conn, _FENCE, {"ids": sorted(job_id for job_id, _ in tokens)})
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
        conn.execute(_DROP_VERSIONS, plan.dropped)
    for event, ids in plan.finished.items():
        if owed := [job_id for job_id in ids if job_id in hooked]:
            owe(conn, owed, event, now, webhook_max_attempts)
    failures: dict[str, int] = {}
    if plan.failing:
        failures = dict(all_rows(conn, _STREAKS, {"domains": plan.failing}))
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
        self.finished: dict[str, list[str]] = defaultdict(list)
        freed: dict[str, int] = defaultdict(int)
        freed_tenants: dict[str, int] = defaultdict(int)
        streaks: dict[str, tuple[bool, int]] = {}
        for outcome in outcomes:
            lease = outcome.lease
            fence = {"job": lease.id, "lease": lease.lease_id, "now": now}
            self._job(outcome, fence, now)
            self.history.append(_history_row(outcome, now))
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
            (_SUCCEED, self.succeed),
            (_CONFIRM, self.confirm),
            (_FAIL, self.fail),
            (_HAND_BACK, self.hand_back),
        ]
        self.writes: list[Writes] = [
            backend.updates(statement, _storable(params)) for statement, params in updates if params
        ]
        if binds_lists(backend.name):
            lists = lists_of(self.domains, d="d", freed="freed", reset="reset", streak="streak")
            lists |= lists_of(self.tenants, t="t", tenant_freed="freed")
            self.writes.append(Once(_FREE_TOGETHER, lists | {"now": now}))
        else:
            self.writes.append(backend.updates(_FREE_SLOTS, self.domains))
            if self.tenants:
                self.writes.append(backend.updates(_FREE_TENANTS, self.tenants))
        # Inserts after the updates: they lock no domain's nor tenant's row. Together: one
        # statement on PostgreSQL.
        new_rows = [
            NewRows(attempts, _storable(self.history)),
            NewRows(contents, _storable(self.contents), skip_existing=True),
        ]
        self.writes.append(backend.inserts_together(new_rows))

    def _job(self, outcome: Outcome, fence: dict[str, Any], now: datetime) -> None:
        decision, lease = outcome.decision, outcome.lease
        if isinstance(decision, Complete):
            fetched = decision.fetched
            version = lease.previous.version + 1 if lease.previous else 1
            page = _page(fetched.metadata)
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
                    "refresh_at": decision.refresh_at,
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
                }
            )
            if version > self.versions:
                self.dropped.append({"job": lease.id, "upto": version - self.versions})
            event = DeliveryEvent.JOB_CHANGED if decision.changed else DeliveryEvent.JOB_SUCCEEDED
            self.finished[event].append(lease.id)
            return
        if isinstance(decision, Confirm):
            unmodified, previous = decision.unmodified, lease.previous
            etag, last_modified = unmodified.etag, unmodified.last_modified
            # A 304 may leave its validators out: those it answered to still hold.
            if unmodified.http_status == 304 and previous is not None:
                etag = etag or previous.etag
                last_modified = last_modified or previous.last_modified
            self.confirm.append(
                fence
                | {
                    "etag": etag,
                    "last_modified": last_modified,
                    "bytes": unmodified.bytes,
                    "sha256": unmodified.sha256,
                    "refresh_at": decision.refresh_at,
                }
            )
            return
        values = fence | {
            "given_back": 0 if decision.spends_attempt else 1,
            "deferred": 0,
            "retry_after": None,
            "dead_reason": None,
            "finished_at": None,
        }
        if isinstance(decision, Reschedule):
            values |= {
                "status": JobStatus.PENDING.value,
                "retry_after": decision.retry_at,
                "deferred": 1 if decision.deferral else 0,
            }
        else:
            values |= {
                "status": JobStatus.DEAD.value,
                "dead_reason": decision.reason.value,
                "finished_at": now,
            }
            gone = decision.reason is DeadReason.GONE
            self.finished[DeliveryEvent.JOB_GONE if gone else DeliveryEvent.JOB_DEAD].append(
                outcome.lease.id
            )
        if outcome.transition is Transition.HANDED_BACK:
            self.hand_back.append(values)
        else:
            assert decision.failure is not None
            self.fail.append(values | _last_error(decision.failure))


def _storable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def _page(metadata: PageMetadata) -> dict[str, Any]:
    """The page's metadata as the JSON object `jobs.result_metadata` holds, every string
    made storable (`storable_text`): `_storable` sees only a row's top-level strings."""
    page: dict[str, Any] = {}
    for name in _PAGE_FIELDS:
        value = getattr(metadata, name)
        if isinstance(value, str):
            value = storable_text(value)
        elif isinstance(value, tuple):
            value = [storable_text(item) for item in value]
        page[name] = value
    return page


def _last_error(failure: Failure) -> dict[str, Any]:
    return {
        "error_kind": failure.kind.value,
        "error_type": failure.type,
        "error_message": failure.message,
        "error_http_status": failure.http_status,
    }


def _history_row(outcome: Outcome, now: datetime) -> dict[str, Any]:
    """The attempt's row in the history, as it ended."""
    decision, lease = outcome.decision, outcome.lease
    failure = None if isinstance(decision, Complete | Confirm) else decision.failure
    http_status = None
    if isinstance(decision, Complete):
        http_status = decision.fetched.http_status
    elif isinstance(decision, Confirm):
        http_status = decision.unmodified.http_status
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
        "message": outcome.message if failure is None else failure.message,
        "http_status": http_status if failure is None else failure.http_status,
        # Null only when the attempt ended the job: a job due again at once says when (now),
        # so the dashboard tells a retried attempt from a fatal one by this column alone.
        "next_retry_at": (decision.retry_at or now) if isinstance(decision, Reschedule) else None,
    }


def _lag_ms(due_at: datetime | None, claimed_at: datetime) -> int | None:
    """How long a job had been due when claimed, for the dashboard's queue lag; never below
    0 (another host's clock may run ahead). Unknown for a lease taken back from a worker
    gone silent (`Queue.overdue` reads no due time)."""
    if due_at is None:
        return None
    return max(0, int((claimed_at - due_at).total_seconds() * 1000))


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
