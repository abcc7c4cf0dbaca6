"""A wake-up signal for the background loops (job worker, webhook sender)."""

import asyncio


class Wakeup:
    """`set()` from anywhere on the loop; `wait(timeout)` returns at the first set or the
    timeout, whichever comes first, and re-arms. A set that comes while nobody waits is kept,
    so a loop never misses work signalled between its look and its wait."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                await self._event.wait()
        except TimeoutError:
            pass
        self._event.clear()
