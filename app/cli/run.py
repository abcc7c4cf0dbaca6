"""What `ingest serve`, `ingest worker`, `ingest db upgrade` and `ingest openapi` run.

Imported by those commands only, when they run: `ingest worker` builds a `Runtime` with a
worker and no API, so it never imports FastAPI.
"""

import asyncio
import errno
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
from typing import TYPE_CHECKING

import typer

from app import event_loops
from app.cli.runner import fail, load_settings, one_line, require_schema, run_on_database
from app.keys import Keys
from app.model import woken_for
from app.observability.events import configure_logging
from app.observability.metrics import Metrics
from app.settings import Settings
from app.worker.process import Handoff

if TYPE_CHECKING:
    from app.runtime import Runtime

log = logging.getLogger("ingest.cli")


def serve_api(host: str | None, port: int | None) -> None:
    import uvicorn

    from app.api.app import create_app

    settings = load_settings()
    # --host stands for INGEST_HOST wherever it is read: the API answers to the name it listens on
    # (`app.api.middleware.hosts`), and is open on loopback only. Not --port: `--port 0` (any free
    # port) is no valid INGEST_PORT, and the worker process rebuilds the settings it is sent.
    if host is not None:
        settings = settings.model_copy(update={"host": host})
    _refuse_open_to_others(settings)
    # Checked before logging is set up: importing Alembic logs its plugins at INFO.
    _refuse_unknown_schema(settings.database_url)
    configure_logging(settings.log_level, settings.log_format)
    # Listen before the app starts: its lifespan starts the worker, which must not claim a
    # job in a process that then fails to bind and exits.
    listener = _listen(settings.host, settings.port if port is None else port)
    config = uvicorn.Config(
        create_app(settings),
        log_config=None,
        timeout_graceful_shutdown=int(settings.shutdown_grace_seconds) + 5,
    )
    # uvicorn stops cleanly on SIGTERM or SIGINT, then raises the signal again for the
    # handler it found installed: Python's default would kill the process (exit -15) or
    # raise KeyboardInterrupt after a clean stop. This one lets it end with 0, like
    # `ingest worker`.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, _already_stopped)
    _settle_in()
    uvicorn.Server(config).run(sockets=[listener])
    log.info("ingest serve stopped")


def _refuse_open_to_others(settings: Settings) -> None:
    """End serve (exit 2) if it would serve the API without keys beyond this machine, unless
    INGEST_ALLOW_OPEN_API says to: the Docker image listens on 0.0.0.0."""
    if settings.api_keys or settings.allow_open_api or loopback(settings.host):
        return
    fail(
        f"refusing to serve the API on {settings.host} without API keys: anyone who can reach "
        "it could read, retry and delete every job. Set INGEST_API_KEYS (key:tenant,...; "
        "tenant * for an admin), or INGEST_ALLOW_OPEN_API=true to serve it open anyway",
        code=2,
    )


def loopback(host: str) -> bool:
    """True if `host` (INGEST_HOST, serve's --host) is reached from this machine only."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False  # a name: where it points is not known here


def _settle_in() -> None:
    """Once `ingest serve` or `ingest worker` has started: the process tuned for running
    long, the same way in both."""
    _freeze_start_up()
    _switch_threads_sooner()


def _freeze_start_up() -> None:
    """Leave what start-up built (modules, classes, the app: most of the heap, all of it
    alive for good) out of the garbage collector's full passes. Each pass walked all of it,
    holding the interpreter lock: with the worker draining, passes came often and every
    request in flight waited for them (POST /jobs p99; docs/design/api.md)."""
    gc.collect()
    gc.freeze()


SWITCH_INTERVAL_SECONDS = 0.001
"""Python's default is 5 ms."""


def _switch_threads_sooner() -> None:
    """A thread that wakes (the API's loop on a request, SQLite's writer as each statement
    step returns, the loop when its write is done) waits for the interpreter lock until the
    thread holding it lets go, or is asked to after the switch interval; with the worker
    draining at full speed on a thread of the process, one always holds it. A shorter
    interval lowers POST /jobs p99 beside a draining worker, and the drain is no slower
    (docs/design/api.md)."""
    sys.setswitchinterval(SWITCH_INTERVAL_SECONDS)


def _already_stopped(signum: int, _frame: object) -> None:
    """uvicorn's re-raise of the signal that stopped it: the service has stopped already."""
    log.debug("%s after a clean stop", signal.Signals(signum).name)


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # Not socket.create_server: it opens the socket with protocol 0, and asyncio sets
    # TCP_NODELAY only on connections accepted from a socket that says it is TCP. Without it
    # every response after the first on a keep-alive connection waited for the client's
    # delayed ACK (Nagle's algorithm; docs/design/api.md).
    listener = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        listener.bind((host, port))
        listener.listen()
    except OSError as exc:
        listener.close()
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        taken = exc.errno == errno.EADDRINUSE
        fail(
            f"cannot listen on {host}:{port}: {reason}{' (choose another --port)' if taken else ''}"
        )
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    log.info("listening on http://%s:%d", shown, listener.getsockname()[1])
    return listener


def _revisions(database_url: str) -> tuple[str, ...]:
    """The revisions the database is at; none for a SQLite file still to be created."""
    from app.cli.schema import current_revisions, sqlite_file

    path = sqlite_file(database_url)
    if path is not None and not path.is_file():
        return ()
    return run_on_database(database_url, current_revisions, check=False)


def _refuse_unknown_schema(database_url: str) -> None:
    from app.cli.schema import Migrations, SchemaRefused, refuse_unknown

    try:
        refuse_unknown(database_url, _revisions(database_url), Migrations.load(database_url))
    except SchemaRefused as exc:
        fail(str(exc), code=2)


def run_worker(metrics_port: int | None, child: bool = False) -> None:
    """`ingest worker`; as `ingest serve`'s `child`, on what serve sends first on standard
    input (`app.worker.process.Handoff`)."""
    if child:
        handoff = Handoff.from_line(_first_line(sys.stdin.fileno()))
        settings, metrics_keys = handoff.settings, handoff.metrics_keys
    else:
        settings = load_settings()
        metrics_keys = Keys.of(settings.api_keys).admins()
    # A worker does not migrate: without the schema it would fail on every poll. Checked
    # before logging is set up: importing Alembic logs its plugins at INFO.
    require_schema(settings.database_url)
    configure_logging(settings.log_level, settings.log_format)
    port = settings.metrics_port if metrics_port is None else metrics_port
    host = settings.metrics_host
    metrics = Metrics()
    # One scrape per process: this worker's counts are served by this process alone.
    server = None
    if port:
        try:
            server = metrics.serve(
                port, host, admins=metrics_keys, timeout=settings.metrics_timeout_seconds
            )
        except OSError as exc:
            fail(f"cannot serve metrics on {host}:{port}: {exc}")
        log.info(
            "worker metrics on http://%s:%d: /metrics, and /healthz (200 while the worker runs)",
            host,
            server.port,
        )
    try:
        event_loops.run(_work(settings, metrics, child))
    finally:
        if server is not None:
            server.close()


async def _work(settings: Settings, metrics: Metrics, child: bool) -> None:
    from app.runtime import Runtime

    runtime = Runtime.build(settings, run_worker=True)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, runtime.stop_worker)
    try:
        await runtime.start(metrics)
        _settle_in()
        await (_serve_parent(runtime) if child else runtime.wait())
    finally:
        await runtime.stop()


def _first_line(fd: int) -> str:
    """A line of `fd`, read a byte at a time: nothing past it is taken from the pipe (those
    bytes are wake-ups, `_serve_parent`'s)."""
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            fail("no settings on standard input (`ingest worker --child` is `ingest serve`'s)")
        line += byte
    return line.decode()


async def _serve_parent(runtime: "Runtime") -> None:
    """As `ingest serve`'s child: wake the worker on each byte of standard input, and stop it
    when the input ends (serve stopping, or gone); return once it has stopped."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def listen() -> None:
        # Each line is a wake-up (`WorkerProcess.wake`); those read at once wake it once,
        # with the highest priority any of them carries.
        while chunk := await reader.read(4096):
            runtime.wake_worker(woken_for(*chunk.decode("ascii", "replace").split("\n")))
        runtime.stop_worker()

    listening = asyncio.create_task(listen())
    try:
        await runtime.wait()
    finally:
        listening.cancel()


def upgrade() -> None:
    from app.cli.schema import SchemaRefused, describe
    from app.cli.schema import upgrade as upgrade_schema

    settings = load_settings()
    current = _revisions(settings.database_url)
    try:
        done = upgrade_schema(settings.database_url, current)
    except SchemaRefused as exc:
        fail(str(exc), code=2)
    except Exception as exc:
        fail(f"could not migrate {describe(settings.database_url)}: {one_line(exc)}")
    typer.echo(done)


def openapi_yaml() -> str:
    import yaml

    from app.api.app import create_app

    schema = create_app(Settings(worker_enabled=False)).openapi()
    return yaml.safe_dump(schema, sort_keys=False, allow_unicode=True)
