"""The store as a state machine (Hypothesis stateful testing), on both backends.

Random sequences of what the worker and operators do to jobs, with a fake clock: submit,
claim, record each kind of outcome (built by `app.rules.policy` as the worker builds them),
heartbeat, let leases run out and take them back, write through a stale lease, retry,
cancel, delete, pause and resume a domain, prune. A model of every job says where it must
be; after each step the database must agree with it and hold these invariants:

- every job the model knows is in the database, in the model's status, and none other;
- attempts never exceed max_attempts (and a pending job has budget left);
- `retry_after` is the due time of a pending job: set only on pending jobs, equal to the
  time the last submit, backoff or deferral gave (null when due at once), and a pending
  job whose `retry_after` is still to come is never claimed;
- a running job has exactly one live lease: its `lease_id` is the one the model holds, with
  one open attempt (numbered after those that ended); other jobs hold no lease, no open
  attempt;
- `finished_at` and `dead_reason` are set exactly on finished and dead jobs;
- each domain's `in_flight` is the number of its running jobs, and so is each tenant's;
- a write through a stale lease (recorded, taken back, or superseded by a new claim)
  changes nothing: not the job, its attempts, nor its domain.

At the end (teardown) only successes follow: every job must reach a finished state within
a bounded number of claims, whatever happened before.

Async store, sync Hypothesis: each example runs its own event loop (`asyncio.Runner`) on a
fresh database: a new copy of the migrated SQLite file, or truncated PostgreSQL tables.
"""

import asyncio
import functools
import shutil
import uuid
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any, TypeVar, cast
from unittest import mock

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import app.store.jobs.rows
from app.model import (
    FINISHED,
    Confirmed,
    Deferred,
    Died,
    DomainPause,
    ErrorKind,
    Expired,
    Failure,
    Fetched,
    HandedBack,
    JobStatus,
    Lease,
    NewJob,
    NotKept,
    Outcome,
    Retried,
    Succeeded,
)
from app.part_settings import PartSettings
from app.rules import policy
from app.settings import Settings
from app.store.database import Database
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.jobs.errors import StateConflict
from app.store.maintenance import MaintenanceStore
from app.store.tables import attempts, contents, domains, jobs, tenants
from tests.conftest import _truncate
from tests.support.stores import queue_on

T = TypeVar("T")

START = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LEASE_SECONDS = 30.0
DOMAINS = ("a.test", "b.test")
TENANTS = ("t1", "t2")
WORKERS = ("w1", "w2")
SETTINGS = Settings(
    _env_file=None,
    domain_max_in_flight=2,
    backoff_base_seconds=2.0,
    backoff_max_seconds=20.0,
    backoff_jitter=0.0,
    retry_after_max_seconds=60.0,
    max_deferrals=2,
)
RETRY = PartSettings.of(SETTINGS).retry
FETCHED = Fetched(200, "http://a.test/", "text/html", 4, "0" * 64, "t", 4, b"body", "body")
FAILURES = {
    "transient": Failure(ErrorKind.TRANSIENT, "HTTPStatusError", "HTTP 503", 503),
    "rate_limited": Failure(ErrorKind.RATE_LIMITED, "HTTPStatusError", "HTTP 429", 429, "7"),
    "fatal": Failure(ErrorKind.FATAL, "HTTPStatusError", "HTTP 404", 404),
}
OUTCOME_KINDS = ("complete", "handed_back", *FAILURES)
LONGEST_WAIT = timedelta(hours=1)
"""Longer than any backoff, Retry-After, not_before, pause or lease here."""


@dataclass(frozen=True)
class Expected:
    """What the model says of one job."""

    status: JobStatus
    attempts: int
    max_attempts: int
    domain: str
    retry_after: datetime | None
    finished_at: datetime | None = None


def outcome_of(kind: str, lease: Lease, now: datetime) -> Outcome:
    """The outcome the worker records for a fetch that ended this way."""
    if kind == "complete":
        return policy.settle(lease, FETCHED, 5, now, RETRY, lambda: 0.5)
    if kind == "handed_back":
        return policy.handed_back(lease, now)
    return policy.settle(lease, FAILURES[kind], 5, now, RETRY, lambda: 0.5)


Step = TypeVar("Step", bound=Callable[..., None])


def step(function: Step) -> Step:
    """A rule or invariant whose failure marks the example broken, so that the teardown
    does not pile a second failure on the first."""

    @functools.wraps(function)
    def marked(self: "QueueMachine", *args: Any, **kwargs: Any) -> None:
        try:
            function(self, *args, **kwargs)
        except BaseException:
            self.broken = True
            raise

    return cast(Step, marked)


NEW_JOBS: dict[str, st.SearchStrategy[Any]] = {
    "count": st.integers(1, 4),
    "domain": st.sampled_from(DOMAINS),
    "tenant": st.sampled_from(TENANTS),
    "max_attempts": st.integers(1, 3),
    "priority": st.integers(-1, 1),
    "not_before": st.sampled_from([None, -5, 10, 45]),
}
"""A submit's arguments: the first jobs of an example, and every later submit."""


class QueueMachine(RuleBasedStateMachine):
    new_database_url: Callable[[], str]
    """Set per backend: a fresh, migrated, empty database for one example."""

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        # Job ids in submission order: the claim breaks ties by id, and a replay (Hypothesis
        # shrinking) must take the same jobs as the run it replays, so ids cannot be random.
        numbers = count(1)

        def numbered() -> str:
            return str(uuid.UUID(int=next(numbers)))

        self.numbered_ids = mock.patch.object(app.store.jobs.rows, "new_job_id", numbered)
        self.numbered_ids.start()
        self.broken = False
        self.now = START
        self.db = Database(self.run(self._fresh_url()))
        self.jobs = JobStore(self.db, lambda: self.now)
        self.queue = queue_on(self.db, SETTINGS)
        self.domains = DomainStore(self.db, lambda: self.now)
        self.model: dict[str, Expected] = {}
        self.held: dict[str, tuple[Lease, datetime]] = {}
        """Running job -> its live lease and when that lease runs out."""
        self.stale: list[Lease] = []
        self.paused: dict[str, datetime] = {}
        self.known_domains: set[str] = set()
        """Domains with a row: a job named them once."""
        self.submitted: dict[str, int] = {}
        """Job id -> its place in submission order. Steps pick jobs in this order, never by
        id: ids are random, and a replay (Hypothesis shrinking) must pick the same jobs."""

    async def _fresh_url(self) -> str:
        url = type(self).new_database_url()
        if url.startswith("postgresql"):
            await _truncate(url)
        return url

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run a step's database work on this example's loop."""
        return self.runner.run(work)

    def teardown(self) -> None:
        try:
            if not self.broken:
                self.run(self._finish_everything())
        finally:
            self.runner.run(self.db.dispose())
            self.runner.close()
            self.numbered_ids.stop()

    # ---- the model's reads -------------------------------------------------------------

    def _in_order(self, ids: Iterable[str]) -> list[str]:
        return sorted(ids, key=self.submitted.__getitem__)

    def _pick(self, index: int) -> str:
        ids = self._in_order(self.model)
        return ids[index % len(ids)]

    def _claimable(self) -> list[str]:
        running = self._running_per_domain()
        return [
            i
            for i, e in self.model.items()
            if e.status is JobStatus.PENDING
            and (e.retry_after is None or e.retry_after <= self.now)
            and self.paused.get(e.domain, self.now) <= self.now
            and running.get(e.domain, 0) < SETTINGS.domain_max_in_flight
        ]

    def _running_per_domain(self) -> dict[str, int]:
        running: dict[str, int] = {}
        for e in self.model.values():
            if e.status is JobStatus.RUNNING:
                running[e.domain] = running.get(e.domain, 0) + 1
        return running

    # ---- the worker's steps ------------------------------------------------------------

    # mypy cannot match a ** of a dict against the overloads' `target`, `targets`
    @initialize(**NEW_JOBS)  # type: ignore[call-overload]
    @step
    def first_jobs(self, **job: Any) -> None:
        """Every example starts with work: without it most steps would find nothing to do."""
        self.submit(**job)

    @rule(**NEW_JOBS)  # type: ignore[call-overload]
    @step
    def submit(
        self,
        count: int,
        domain: str,
        tenant: str,
        max_attempts: int,
        priority: int,
        not_before: int | None,
    ) -> None:
        due = None if not_before is None else self.now + timedelta(seconds=not_before)
        new = NewJob(f"http://{domain}/", domain, tenant, max_attempts, priority, not_before=due)
        submitted = self.run(self.jobs.submit([new] * count))
        self.known_domains.add(domain)
        for job in submitted:
            self.submitted[job.id] = len(self.submitted)
            retry_after = due if due is not None and due > self.now else None
            self.model[job.id] = Expected(JobStatus.PENDING, 0, max_attempts, domain, retry_after)

    @rule(limit=st.integers(1, 5), worker=st.sampled_from(WORKERS))
    @step
    def claim(self, limit: int, worker: str) -> None:
        claimable = self._claimable()
        leases = self.run(self.queue.claim(worker, limit, self.now, LEASE_SECONDS))
        self._came_due()
        assert len(leases) <= limit
        assert not claimable or leases, "a claim took nothing though jobs were claimable"
        for lease in leases:
            assert lease.id in claimable, f"claimed {lease.id}, not claimable"
            self._claimed(lease)
        for domain, running in self._running_per_domain().items():
            assert running <= SETTINGS.domain_max_in_flight, domain

    def _came_due(self) -> None:
        """A claim that looks first moves every waiting job that came due among the ready
        ones (`app.store.claim`, step 0): its `retry_after` is cleared."""
        for job_id, job in self.model.items():
            waited = job.retry_after
            if job.status == JobStatus.PENDING and waited is not None and waited <= self.now:
                self.model[job_id] = replace(job, retry_after=None)

    def _claimed(self, lease: Lease) -> None:
        before = self.model[lease.id]
        assert before.attempts + 1 == lease.attempt
        self.model[lease.id] = replace(
            before, status=JobStatus.RUNNING, attempts=lease.attempt, retry_after=None
        )
        self.held[lease.id] = (lease, self.now + timedelta(seconds=LEASE_SECONDS))

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 50), kind=st.sampled_from(OUTCOME_KINDS))
    @step
    def record(self, index: int, kind: str) -> None:
        job_id = self._in_order(self.held)[index % len(self.held)]
        lease, _ = self.held.pop(job_id)
        outcome = outcome_of(kind, lease, self.now)
        recorded = self.run(self.queue.record([outcome], self.now))
        assert [outcome] == recorded.outcomes, "a live lease's outcome was refused"
        self._ended(outcome)

    def _ended(self, outcome: Outcome) -> None:
        """The model after `outcome` was recorded: its lease is stale from now on."""
        lease = outcome.lease
        self.stale.append(lease)
        before = self.model[lease.id]
        retry_at: datetime | None = None
        match outcome:
            case Succeeded():
                self.model[lease.id] = replace(
                    before, status=JobStatus.SUCCEEDED, finished_at=self.now
                )
                return
            case Retried():
                spent, dead, retry_at = True, False, outcome.retry_at
            case Deferred():
                spent, dead, retry_at = False, False, outcome.retry_at
            case HandedBack():
                spent, dead = False, False
            case Expired():
                spent, dead = True, outcome.dead
            case Died():
                spent, dead = outcome.spends_attempt, True
            case Confirmed() | NotKept():
                raise AssertionError(f"no refresh in this machine: {outcome}")
        attempts = lease.attempt - (0 if spent else 1)
        if not dead:
            self.model[lease.id] = replace(
                before, status=JobStatus.PENDING, attempts=attempts, retry_after=retry_at
            )
        else:
            self.model[lease.id] = replace(
                before, status=JobStatus.DEAD, attempts=attempts, finished_at=self.now
            )

    @precondition(lambda self: self.held)
    @rule()
    @step
    def heartbeat(self) -> None:
        leases = {lease for lease, _ in self.held.values()}
        until = self.now + timedelta(seconds=LEASE_SECONDS)
        assert leases == self.run(self.queue.extend_leases(leases, until))
        self.held = {job_id: (lease, until) for job_id, (lease, _) in self.held.items()}

    @rule(seconds=st.sampled_from([1, 5, 15, LEASE_SECONDS + 1, 120]))
    @step
    def advance_clock(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @precondition(lambda self: self.held)
    @rule()
    @step
    def take_back_expired(self) -> None:
        """As the maintenance service does: each expired lease settled by policy and recorded."""
        expected = {job_id for job_id, (_, until) in self.held.items() if until < self.now}

        async def take_back() -> tuple[list[Outcome], list[Outcome]]:
            outcomes = [
                policy.expired(lease, self.now)
                for lease in (await MaintenanceStore(self.db).overdue(self.now)).expired
            ]
            return outcomes, (await self.queue.record(outcomes, self.now)).outcomes

        outcomes, recorded = self.run(take_back())
        assert expected == {o.lease.id for o in outcomes}
        assert outcomes == recorded
        # In submission order, not the database's: `stale` keeps this order for later picks.
        for outcome in sorted(recorded, key=lambda o: self.submitted[o.lease.id]):
            held, _ = self.held.pop(outcome.lease.id)
            assert (held.lease_id, held.attempt) == (outcome.lease.lease_id, outcome.lease.attempt)
            self._ended(outcome)

    @precondition(lambda self: self.stale)
    @rule(index=st.integers(0, 50), kind=st.sampled_from(OUTCOME_KINDS))
    @step
    def write_through_stale_lease(self, index: int, kind: str) -> None:
        """A worker that lost its lease records late, and heartbeats: nothing changes."""
        self._write_late(self.stale[index % len(self.stale)], kind)

    def _superseded(self) -> list[Lease]:
        """Stale leases of jobs running again under a newer claim: the case fencing is for
        (the same attempt number, even, after an operator's retry)."""
        return [lease for lease in self.stale if lease.id in self.held]

    @invariant()
    @step
    def superseded_leases_write_nothing(self) -> None:
        """After every step, each superseded lease (and the latest stale one) tries a late
        write, of each kind in turn: an invariant rather than a rule, since Hypothesis
        enables only some rules in each example and this case needs several steps first."""
        for i, lease in enumerate(dict.fromkeys([*self._superseded(), *self.stale[-1:]])):
            self._write_late(lease, OUTCOME_KINDS[(len(self.stale) + i) % len(OUTCOME_KINDS)])

    def _ended_pending(self) -> list[Lease]:
        return [
            lease
            for lease in self.stale
            if lease.id in self.model and self.model[lease.id].status is JobStatus.PENDING
        ]

    @precondition(lambda self: self._ended_pending())
    @rule(index=st.integers(0, 50))
    @step
    def claim_again(self, index: int) -> None:
        """An operator makes a job whose lease ended due now, and the same worker claims
        again: its old lease is superseded (at the same attempt number, after a retry of a
        dead job). Without this step, that is rare in a few dozen examples."""
        ended = self._ended_pending()
        lease = ended[index % len(ended)]
        self.retry(self._in_order(self.model).index(lease.id))
        self.claim(5, lease.worker_id)

    def _write_late(self, lease: Lease, kind: str) -> None:
        async def write() -> None:
            before = await self._snapshot(lease)
            recorded = await self.queue.record([outcome_of(kind, lease, self.now)], self.now)
            extended = await self.queue.extend_leases([lease], self.now + timedelta(hours=1))
            assert [] == recorded.outcomes
            assert set() == extended
            assert before == await self._snapshot(lease)

        self.run(write())

    async def _snapshot(self, lease: Lease) -> tuple[Any, ...]:
        async with self.db.read() as conn:
            job = (await conn.execute(sa.select(jobs).where(jobs.c.id == lease.id))).all()
            history = (
                await conn.execute(
                    sa.select(attempts).where(attempts.c.job_id == lease.id).order_by(attempts.c.id)
                )
            ).all()
            content = (
                await conn.execute(
                    sa.select(contents.c.job_id).where(contents.c.job_id == lease.id)
                )
            ).all()
            domain = (
                await conn.execute(sa.select(domains).where(domains.c.domain == lease.domain))
            ).all()
        return job, history, content, domain

    # ---- the operators' steps ----------------------------------------------------------

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50))
    @step
    def retry(self, index: int) -> None:
        job_id = self._pick(index)
        before = self.model[job_id]
        if before.status in (JobStatus.DEAD, JobStatus.CANCELLED):
            after = replace(
                before, status=JobStatus.PENDING, attempts=0, retry_after=None, finished_at=None
            )
        elif before.status is JobStatus.PENDING:
            after = replace(before, retry_after=None)
        else:
            with pytest.raises(StateConflict):
                self.run(self.jobs.retry(job_id))
            return
        assert after.status == self.run(self.jobs.retry(job_id)).status
        self.model[job_id] = after

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50))
    @step
    def cancel(self, index: int) -> None:
        job_id = self._pick(index)
        before = self.model[job_id]
        if before.status is not JobStatus.PENDING:
            with pytest.raises(StateConflict):
                self.run(self.jobs.cancel(job_id))
            return
        assert JobStatus.CANCELLED == self.run(self.jobs.cancel(job_id)).status
        self.model[job_id] = replace(
            before, status=JobStatus.CANCELLED, retry_after=None, finished_at=self.now
        )

    @precondition(lambda self: self.model)
    @rule(index=st.integers(0, 50))
    @step
    def delete(self, index: int) -> None:
        job_id = self._pick(index)
        if self.model[job_id].status not in FINISHED:
            with pytest.raises(StateConflict):
                self.run(self.jobs.delete(job_id))
            return
        self.run(self.jobs.delete(job_id))
        del self.model[job_id]

    @rule(domain=st.sampled_from(DOMAINS), seconds=st.sampled_from([5, 60]))
    @step
    def pause_domain(self, domain: str, seconds: int) -> None:
        until = self.now + timedelta(seconds=seconds)
        stored = self.run(self.queue.pause_domain(domain, DomainPause(until, "test")))
        if stored:
            self.paused[domain] = until
        else:
            # Refused only when it has no row yet, or a longer pause is there already.
            assert domain not in self.known_domains or self.paused.get(domain, until) >= until

    @precondition(lambda self: self.paused)
    @rule(domain=st.sampled_from(DOMAINS))
    @step
    def resume_domain(self, domain: str) -> None:
        self.run(self.domains.resume(domain))
        self.paused.pop(domain, None)

    @precondition(lambda self: any(e.status in FINISHED for e in self.model.values()))
    @rule(seconds=st.sampled_from([0, 10, 100]))
    @step
    def prune(self, seconds: int) -> None:
        older_than = self.now - timedelta(seconds=seconds)
        prunable = {
            i
            for i, e in self.model.items()
            if e.status in (JobStatus.SUCCEEDED, JobStatus.CANCELLED)
            and e.finished_at is not None
            and e.finished_at < older_than
        }
        assert len(prunable) == self.run(MaintenanceStore(self.db).prune(older_than))
        for job_id in prunable:
            del self.model[job_id]

    # ---- the invariants ----------------------------------------------------------------

    @invariant()
    @step
    def database_agrees_with_the_model(self) -> None:
        self.run(self._check())

    async def _check(self) -> None:
        async with self.db.read() as conn:
            rows = {row.id: row for row in await conn.execute(sa.select(jobs))}
            open_attempts = (
                await conn.execute(
                    sa.select(attempts.c.job_id, attempts.c.number).where(
                        attempts.c.outcome.is_(None)
                    )
                )
            ).all()
            in_flight = {
                row.domain: row.in_flight
                for row in await conn.execute(sa.select(domains.c.domain, domains.c.in_flight))
            }
            tenants_in_flight = {
                tenant: n
                for tenant, n in await conn.execute(
                    sa.select(tenants.c.tenant, tenants.c.in_flight)
                )
            }
        assert set(self.model) == set(rows), "jobs lost or unknown"
        for job_id, expected in self.model.items():
            row = rows[job_id]
            status = JobStatus(row.status)
            assert expected.status == status, job_id
            assert expected.attempts == row.attempts, job_id
            assert row.attempts <= row.max_attempts
            if status is JobStatus.PENDING:
                assert row.attempts < row.max_attempts, "pending without budget left"
            assert expected.retry_after == row.retry_after, job_id
            assert (status in FINISHED) == (row.finished_at is not None), job_id
            assert (status is JobStatus.DEAD) == (row.dead_reason is not None), job_id
            if status is JobStatus.RUNNING:
                lease, until = self.held[job_id]
                assert (lease.lease_id, until) == (row.lease_id, row.lease_expires_at)
                assert row.worker_id == lease.worker_id
            else:
                assert job_id not in self.held
                assert (None, None, None) == (row.lease_id, row.worker_id, row.lease_expires_at)
        # An attempt's row is written whole when it ends; the running one is the job's row.
        assert open_attempts == []
        for job_id in (i for i, e in self.model.items() if e.status is JobStatus.RUNNING):
            history = await self.jobs.attempts(job_id)
            assert list(range(1, len(history) + 1)) == [a.number for a in history]
            assert history[-1].outcome is None
        per_domain = self._running_per_domain()
        for domain, flying in in_flight.items():
            assert per_domain.get(domain, 0) == flying, domain
        per_tenant: dict[str, int] = {}
        for row in rows.values():
            if row.status == JobStatus.RUNNING:
                per_tenant[row.tenant] = per_tenant.get(row.tenant, 0) + 1
        assert per_tenant == {t: n for t, n in tenants_in_flight.items() if n}
        stats = await self.jobs.stats()
        statuses = [e.status for e in self.model.values()]
        assert {s.value: statuses.count(s) for s in JobStatus} == stats.counts
        waiting = [
            e
            for e in self.model.values()
            if e.status is JobStatus.PENDING and e.retry_after and e.retry_after > self.now
        ]
        assert len(waiting) == stats.scheduled

    # ---- the end: only successes from here -----------------------------------------------

    async def _finish_everything(self) -> None:
        """Complete every live lease, then claim and complete until nothing is left: with
        finitely many failures, every job must end finished."""
        for job_id in self._in_order(self.held):
            lease, _ = self.held.pop(job_id)
            outcome = outcome_of("complete", lease, self.now)
            assert [outcome] == (await self.queue.record([outcome], self.now)).outcomes
            self._ended(outcome)
        self.now += LONGEST_WAIT  # past every backoff, deferral, not_before and pause
        self.paused.clear()
        for _ in range(len(self.model) + 1):
            leases = await self.queue.claim("finisher", 100, self.now, LEASE_SECONDS)
            if not leases:
                break
            outcomes = [outcome_of("complete", lease, self.now) for lease in leases]
            assert outcomes == (await self.queue.record(outcomes, self.now)).outcomes
            for lease in leases:
                self._claimed(lease)
                self.held.pop(lease.id)
                self._ended(outcome_of("complete", lease, self.now))
        unfinished = {i: e.status for i, e in self.model.items() if e.status not in FINISHED}
        assert {} == unfinished, "jobs that never finish"
        await self._check()


@pytest.fixture
def fresh_database(database_url: str, tmp_path: Path) -> Callable[[], str]:
    """A fresh, empty, migrated database for each example."""
    if not database_url.startswith("sqlite"):
        return lambda: database_url
    pristine = tmp_path / "pristine.db"
    shutil.copy(database_url.removeprefix("sqlite:///"), pristine)
    numbers = count()

    def copy() -> str:
        path = tmp_path / f"example-{next(numbers)}.db"
        shutil.copy(pristine, path)
        return f"sqlite:///{path}"

    return copy


@pytest.mark.timeout(180)  # 12-20 s a backend here; room for a loaded box and a shrink
def test_the_store_keeps_its_invariants(fresh_database: Callable[[], str]) -> None:
    """Random sequences of worker and operator steps keep every invariant, and in the end
    every job finishes (see the module's docstring)."""
    machine = type("Machine", (QueueMachine,), {"new_database_url": staticmethod(fresh_database)})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=40,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
