"""Turns at the extraction processes, handed out fairly among tenants (`ExtractionPool.turn`).

A body past a small page's size is read and extracted while it holds a turn. A freed turn
goes to the waiting tenant that holds the fewest for its weight (INGEST_TENANT_WEIGHTS, as
the claim shares jobs), the one served longest ago among equals; a tenant's own bodies go
first come, first served. pebble runs what it is given in the order given, so while two
tenants or more hold or wait for turns, no more are out than processes: a turn handed out
then starts at once, whatever another tenant queued. A lone tenant holds up to
`processes - 1` more (at least one), queued in the pool so that no process waits on the
worker's loop for its next body; a tenant that comes then waits for at most `processes`
of the lone tenant's bodies to end. Bookkeeping on the event loop alone: no clock, no I/O.
"""

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Callable


class FairTurns:
    def __init__(self, processes: int, weight: Callable[[str], int] = lambda _: 1) -> None:
        self.shared = max(processes, 1)
        """Turns out at most while two tenants or more hold or wait for one."""
        self.alone = self.shared + max(self.shared - 1, 1)
        """Turns out at most while one tenant alone holds or waits for them."""
        self._weight = weight
        self._held: dict[str, int] = {}
        self._waiting: dict[str, deque[asyncio.Future[None]]] = {}
        self._served: dict[str, int] = {}
        """When each tenant holding or waiting was last handed a turn (a count of turns)."""
        self._handed = 0
        self._out = 0

    @contextlib.asynccontextmanager
    async def turn(self, tenant: str) -> AsyncIterator[None]:
        """Held by `tenant` for one body; waits for it as long as it takes."""
        waiter = self.request(tenant)
        try:
            await waiter
        except asyncio.CancelledError:
            self.withdraw(tenant, waiter)
            raise
        try:
            yield
        finally:
            self.release(tenant)

    def request(self, tenant: str) -> asyncio.Future[None]:
        """A future done once `tenant` holds a turn (at once if one is free for it)."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(tenant, deque()).append(waiter)
        self._hand_out()
        return waiter

    def withdraw(self, tenant: str, waiter: asyncio.Future[None]) -> None:
        """`tenant` no longer wants `waiter`'s turn (its task was cancelled): given back if
        it had been handed out, else its place in the queue is left."""
        if waiter.done() and not waiter.cancelled():
            self.release(tenant)
            return
        waiter.cancel()
        queue = self._waiting.get(tenant)
        if queue is not None and waiter in queue:
            queue.remove(waiter)
            if not queue:
                del self._waiting[tenant]
                self._forget(tenant)
            self._hand_out()

    def release(self, tenant: str) -> None:
        """`tenant` is done with one of its turns."""
        self._out -= 1
        self._held[tenant] -= 1
        if not self._held[tenant]:
            del self._held[tenant]
            self._forget(tenant)
        self._hand_out()

    def held(self, tenant: str) -> int:
        return self._held.get(tenant, 0)

    @property
    def out(self) -> int:
        """Turns held, all tenants together."""
        return self._out

    def _limit(self) -> int:
        tenants = len(self._held.keys() | self._waiting.keys())
        return self.alone if tenants <= 1 else self.shared

    def _hand_out(self) -> None:
        while self._waiting and self._out < self._limit():
            tenant = min(self._waiting, key=self._priority)
            queue = self._waiting[tenant]
            waiter = queue.popleft()
            if not queue:
                del self._waiting[tenant]
            if waiter.cancelled():  # its task has not run `withdraw` yet
                self._forget(tenant)
                continue
            waiter.set_result(None)
            self._out += 1
            self._held[tenant] = self._held.get(tenant, 0) + 1
            self._handed += 1
            self._served[tenant] = self._handed

    def _priority(self, tenant: str) -> tuple[float, int]:
        return (self.held(tenant) / self._weight(tenant), self._served.get(tenant, 0))

    def _forget(self, tenant: str) -> None:
        """A tenant neither holding nor waiting is no longer remembered."""
        if tenant not in self._held and tenant not in self._waiting:
            self._served.pop(tenant, None)
