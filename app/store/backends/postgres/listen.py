"""PostgreSQL's LISTEN connection, kept open while a worker runs: what
`app.store.backends.sqlite.wake_sockets` is to SQLite, across hosts.

A connection of its own, outside the engine's pool, for as long as the worker runs. One
that drops (the server restarted, the backend was terminated, the network went away) is
reopened after `app.store.outages.error_wait`, logged once when lost and once when back;
one idle for LISTEN_PING_SECONDS is pinged, as a connection that died without a word (a
network partition) shows only when used. A NOTIFY sent by one of this process's own
connections is skipped: that submit woke its worker directly.
"""

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from collections.abc import Set as AbstractSet

import asyncpg

from app.model import woken_for
from app.store.outages import error_wait

log = logging.getLogger("ingest.store")

NOTIFY_CHANNEL = "ingest_jobs"
CONNECT_TIMEOUT_SECONDS = 5.0
"""How long a connect may take, the engine's and LISTEN's (asyncpg's own is 60 s)."""

LISTEN_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError)
LISTEN_PING_SECONDS = 30.0
"""How often an idle LISTEN connection is checked."""


@contextlib.asynccontextmanager
async def listening(
    dsn: str, on_notify: Callable[[int | None], None], own_sessions: AbstractSet[int]
) -> AsyncIterator[None]:
    """Call `on_notify` with each NOTIFY on NOTIFY_CHANNEL (its payload read by
    `woken_for`) while the block runs, but those sent from `own_sessions` (server process
    ids, kept up to date by the caller); once more, with None, whenever the connection is
    back, as a submit may have come between."""
    stopping = asyncio.Event()
    keeping = asyncio.create_task(
        _keep_listening(dsn, on_notify, own_sessions, stopping),
        name="listen",
    )
    try:
        yield
    finally:
        # The flag, not only the cancel: asyncpg may turn a cancel that lands inside a
        # query into an error of its own (InternalClientError), which the loop below
        # takes for a lost connection; the flag still ends it.
        stopping.set()
        keeping.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeping


async def _keep_listening(
    dsn: str,
    on_notify: Callable[[int | None], None],
    own_sessions: AbstractSet[int],
    stopping: asyncio.Event,
) -> None:
    failures = 0
    while not stopping.is_set():
        try:
            connection = await asyncpg.connect(dsn, timeout=CONNECT_TIMEOUT_SECONDS)
        except LISTEN_ERRORS as exc:
            if failures == 0:
                log.warning("LISTEN %s unavailable (%s); reconnecting", NOTIFY_CHANNEL, exc)
            failures += 1
            await asyncio.sleep(error_wait(failures))
            continue
        try:
            lost = await _listen_on(connection, on_notify, own_sessions, back=failures > 0)
        finally:
            connection.terminate()
        if stopping.is_set():
            return
        failures = 1
        log.warning("LISTEN connection lost: %s; reconnecting", lost)
        await asyncio.sleep(error_wait(failures))


async def _listen_on(
    connection: asyncpg.Connection,
    on_notify: Callable[[int | None], None],
    own_sessions: AbstractSet[int],
    back: bool,
) -> str:
    """LISTEN on `connection` until it is lost; why it was."""
    closed = asyncio.Event()
    connection.add_termination_listener(lambda _: closed.set())
    try:

        def notified(_: object, sender: int, channel: str, payload: str) -> None:
            # This process's own submits woke its worker already, before their commit
            # reached the server: a second pass would only claim nothing.
            if sender not in own_sessions:
                on_notify(woken_for(payload))

        await connection.add_listener(NOTIFY_CHANNEL, notified)
        if back:
            log.info("LISTEN connection back")
            on_notify(None)
        while not closed.is_set():
            try:
                await asyncio.wait_for(closed.wait(), LISTEN_PING_SECONDS)
            except TimeoutError:
                # A connection that died without a word (a network partition) shows
                # only when used.
                await connection.execute("SELECT 1", timeout=CONNECT_TIMEOUT_SECONDS)
    except Exception as exc:  # whatever broke the LISTEN connection, it is reopened
        return str(exc) or type(exc).__name__
    return "the server closed the connection"
