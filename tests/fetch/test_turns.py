"""app.fetch.turns: the extraction turns go round the tenants. Driven by hand, a request and
a release at a time, on the test's loop: no process, no clock."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from app.fetch.turns import FairTurns


def done(waiters: list[asyncio.Future[None]]) -> list[bool]:
    return [waiter.done() for waiter in waiters]


async def test_a_lone_tenant_has_a_turn_queued_behind_each_process_but_one() -> None:
    """Two processes: a lone tenant holds three turns (two running, one queued in the pool
    so that a process finishing finds its next body there), its fourth body waits."""
    turns = FairTurns(2)
    waiters = [turns.request("a") for _ in range(4)]
    assert ([True, True, True, False], 3) == (done(waiters), turns.out)


async def test_one_process_still_has_a_body_queued_behind_it() -> None:
    """One process (or none: the thread): a lone tenant holds two turns, as before."""
    assert [(1, 2), (1, 2), (3, 5)] == [
        (FairTurns(n).shared, FairTurns(n).alone) for n in (0, 1, 3)
    ]


async def test_a_tenant_that_comes_waits_for_one_body_per_process_at_most() -> None:
    """Tenant a holds 3 turns of 2 processes and has 3 bodies waiting; b's body then waits
    for 2 of a's to end, not for all of a's: the first freed turn only brings a's queued body
    to a process (2 out, as many as processes), the second goes to b, before a's waiting."""
    turns = FairTurns(2)
    a = [turns.request("a") for _ in range(6)]
    b = turns.request("b")
    turns.release("a")
    after_one = (b.done(), turns.out)
    turns.release("a")
    assert ((False, 2), True, [True, True, True, False, False, False]) == (
        after_one,
        b.done(),
        done(a),
    )


async def test_two_backlogged_tenants_take_turns() -> None:
    """Both backlogged on 2 processes, a holding 3 turns when b came: the first freed turn
    brings out no more than processes, then each freed turn goes to the tenant holding fewer
    (the one served longest ago among equals)."""
    turns = FairTurns(2)
    a = [turns.request("a") for _ in range(5)]
    b = [turns.request("b") for _ in range(5)]
    order = []
    for tenant in ("a", "a", "a", "b", "a", "b"):
        before = (sum(done(a)), sum(done(b)))
        turns.release(tenant)
        after = (sum(done(a)), sum(done(b)))
        order.append("a" if after[0] > before[0] else "b" if after[1] > before[1] else "-")
    assert ["-", "b", "a", "b", "a", "b"] == order


async def test_a_tenant_weighing_3_holds_3_turns_for_each_of_a_tenant_weighing_1() -> None:
    """INGEST_TENANT_WEIGHTS acme:3: on 4 processes, acme holds 3 turns and globex 1 once
    both are backlogged, as the claim shares their jobs."""
    turns = FairTurns(4, lambda tenant: {"acme": 3}.get(tenant, 1))
    for _ in range(8):
        turns.request("globex")
        turns.request("acme")
    shares = [(turns.held("acme"), turns.held("globex"))]
    turns.release("globex")
    turns.release("globex")
    shares.append((turns.held("acme"), turns.held("globex")))
    assert [(2, 2), (3, 1)] == shares


async def test_a_cancelled_wait_leaves_its_place_and_a_cancelled_turn_comes_back() -> None:
    """A body whose fetch is cancelled while it waits leaves the queue; one cancelled once
    handed its turn (before it ran) gives it back: the next waiter has it."""
    turns = FairTurns(1)
    first, second = turns.request("a"), turns.request("a")
    third = turns.request("a")
    waiting = turns.request("a")
    waiting.cancel()
    turns.withdraw("a", waiting)
    turns.withdraw("a", second)  # handed out, its task cancelled before it ran
    assert ([True, True, True, True], 2, 0) == (
        done([first, second, third, waiting]),
        turns.out,
        len(turns._waiting),
    )


async def test_a_waiter_cancelled_before_its_task_withdraws_is_passed_over() -> None:
    """A waiter cancelled (the task not yet run to withdraw it) is skipped when a turn frees;
    withdrawing it afterwards changes nothing."""
    turns = FairTurns(1)
    held = [turns.request("a"), turns.request("a")]
    cancelled, next_one = turns.request("a"), turns.request("a")
    cancelled.cancel()
    turns.release("a")
    turns.withdraw("a", cancelled)
    assert ([True, True], True, 2) == (done(held), next_one.done(), turns.out)


async def test_turn_holds_a_turn_for_its_block_and_gives_it_back() -> None:
    """`turn` waits on the request's future, holds the turn for the block, releases it after,
    and a task cancelled while it waits leaves no trace."""
    turns = FairTurns(1)
    inside = asyncio.Event()
    leave = asyncio.Event()

    async def body(tenant: str) -> None:
        async with turns.turn(tenant):
            inside.set()
            await leave.wait()

    holders = [asyncio.create_task(body("a")) for _ in range(2)]
    await inside.wait()
    waiting = asyncio.create_task(body("b"))
    await asyncio.sleep(0)  # a yield, for the task to reach its wait
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    leave.set()
    await asyncio.gather(*holders)
    assert (0, {}, {}) == (turns.out, turns._held, turns._waiting)


@dataclass
class Model:
    """What a run of requests, releases and cancellations did, checked after each step."""

    turns: FairTurns
    weights: dict[str, int]
    requests: dict[str, list[asyncio.Future[None]]] = field(default_factory=dict)
    given_back: dict[str, int] = field(default_factory=dict)

    def held(self, tenant: str) -> int:
        granted = [w for w in self.requests.get(tenant, []) if w.done() and not w.cancelled()]
        return len(granted) - self.given_back.get(tenant, 0)

    def waiting(self, tenant: str) -> list[asyncio.Future[None]]:
        return [w for w in self.requests.get(tenant, []) if not w.done()]

    def apply(self, step: tuple[str, str]) -> None:
        action, tenant = step
        before = {t: self.held(t) for t in self.requests}
        out_before = self.turns.out
        if action == "request":
            self.requests.setdefault(tenant, []).append(self.turns.request(tenant))
        elif action == "release":
            self.turns.release(tenant)
            self.given_back[tenant] = self.given_back.get(tenant, 0) + 1
        else:
            waiter = self.waiting(tenant)[-1]
            waiter.cancel()
            self.turns.withdraw(tenant, waiter)
        self.check(before, out_before)

    def check(self, before: dict[str, int], out_before: int) -> None:
        tenants = [t for t in self.requests if self.held(t) or self.waiting(t)]
        limit = self.turns.alone if len(tenants) <= 1 else self.turns.shared
        held = {t: self.held(t) for t in self.requests}
        assert sum(held.values()) == self.turns.out
        assert all(held[t] == self.turns.held(t) for t in held)
        handed = [t for t in held if held[t] > before.get(t, 0)]
        # Never more turns out than the limit, unless they were out before (a tenant came).
        assert self.turns.out <= max(limit, out_before) and (not handed or self.turns.out <= limit)
        # Nothing waits while a turn is free for it.
        assert self.turns.out >= limit or not any(self.waiting(t) for t in tenants)
        for tenant in self.requests:  # each tenant's bodies in their order
            granted = [w.done() for w in self.requests[tenant] if not w.cancelled()]
            assert granted == sorted(granted, reverse=True)
        for got in handed:  # a turn went to no tenant holding more than one left waiting
            share = (held[got] - 1) / self.weights.get(got, 1)
            assert all(
                held[t] / self.weights.get(t, 1) >= share for t in tenants if self.waiting(t)
            )


def steps(model: Model, tenants: str) -> list[tuple[str, str]]:
    """Every step possible now: a request by any tenant, a release by one holding a turn, a
    cancellation of one's last waiting body."""
    possible = [("request", t) for t in tenants]
    possible += [("release", t) for t in tenants if model.held(t)]
    possible += [("cancel", t) for t in tenants if model.waiting(t)]
    return possible


async def explore(
    make: Callable[[], FairTurns], weights: dict[str, int], tenants: str, depth: int
) -> set[str]:
    """Run every sequence of `depth` steps from scratch, checking after each step; the kinds
    of step taken."""
    kinds = set()
    frontier: list[list[tuple[str, str]]] = [[]]
    for _ in range(depth):
        longer = []
        for prefix in frontier:
            model = Model(make(), weights)
            for step in prefix:
                model.apply(step)
            for step in steps(model, tenants):
                replay = Model(make(), weights)
                for earlier in [*prefix, step]:
                    replay.apply(earlier)
                kinds.add(step[0])
                longer.append([*prefix, step])
        frontier = longer
    return kinds


@pytest.mark.parametrize(
    ("processes", "weights", "tenants", "depth"),
    [(1, {}, "ab", 7), (2, {}, "ab", 7), (3, {}, "ab", 7), (2, {"a": 2}, "abc", 5)],
)
async def test_every_sequence_of_requests_releases_and_cancellations_keeps_the_rules(
    processes: int, weights: dict[str, int], tenants: str, depth: int
) -> None:
    """Every sequence of a few steps, each checked: the turns held add up; none is handed
    out past the limit (processes while two tenants are there, more for a lone one); none is
    left free while a body waits; a tenant's bodies go in their order; a turn goes to no
    tenant that holds more, for its weight, than one left waiting."""

    def make() -> FairTurns:
        return FairTurns(processes, lambda tenant: weights.get(tenant, 1))

    assert {"request", "release", "cancel"} == await explore(make, weights, tenants, depth)
