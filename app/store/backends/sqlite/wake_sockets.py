"""Wake-ups between processes on one SQLite database: PostgreSQL's NOTIFY, on one host.

SQLite has no way to tell another process that a job was submitted, so an `ingest worker`
apart from the API learnt of a submit only at its next poll (INGEST_POLL_INTERVAL_SECONDS,
2 s by default). Here each worker listening on a database binds a Unix datagram socket in a
directory of its own for that database (in the temporary directory, named by a digest of
the database file's path: a socket's path must fit `sun_path`, 108 bytes on Linux), and a
submit (or a requeue, once committed) sends each socket there one datagram, the wake-up's text
(`app.model.wake_payload`). Sent without waiting: a socket whose worker is gone refuses it
and is removed; one whose queue is full holds wake-ups enough. Processes of other hosts, or
of another user, are not woken: they poll, as before. The directory is this user's alone
(mode 0700); one that another user made first is not used (its owner could wake the
workers or read the wake-ups): they poll.
"""

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from app.model import wake_payload, woken_for

log = logging.getLogger("ingest.store")

MAX_DATAGRAM = 64
"""A wake-up's text is a priority: a few digits."""


class WakeSockets:
    """The wake-up sockets of the workers of one SQLite database file."""

    def __init__(self, database_file: str) -> None:
        digest = hashlib.sha256(str(Path(database_file).resolve()).encode()).hexdigest()[:16]
        self.directory = Path(tempfile.gettempdir()) / f"ingest-wake-{digest}"
        self._own: set[str] = set()
        self._sender: socket.socket | None = None

    def wake(self, priority: int | None) -> None:
        """Wake every worker listening on this database in other processes (this one's are
        woken directly), telling them the highest `priority` submitted. Never blocks."""
        if not self._ours():
            return  # no worker has listened yet, or the directory is another user's
        try:
            names = os.listdir(self.directory)
        except OSError:
            return
        if self._sender is None:
            self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            self._sender.setblocking(False)
        text = wake_payload(priority).encode()
        for name in names:
            if name in self._own:
                continue
            path = self.directory / name
            try:
                self._sender.sendto(text, str(path))
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(OSError):
                    path.unlink()  # its worker is gone
            except OSError:
                pass  # its queue is full: it has wake-ups enough to read

    @contextlib.asynccontextmanager
    async def listening(self, on_wake: Callable[[int | None], None]) -> AsyncIterator[None]:
        """Call `on_wake` with the highest priority of the datagrams read at once, on this
        loop, while the block runs. If the socket cannot be made (a read-only temporary
        directory), say so once: the worker polls."""
        receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        name = uuid.uuid4().hex[:12]
        try:
            self.directory.mkdir(mode=0o700, exist_ok=True)
            if not self._ours():
                raise PermissionError(f"{self.directory} is not this user's alone")
            receiver.bind(str(self.directory / name))
        except OSError as exc:
            receiver.close()
            log.warning("no wake-up socket for other processes' submits (%s); polling", exc)
            yield
            return
        receiver.setblocking(False)
        self._own.add(name)
        loop = asyncio.get_running_loop()

        def read() -> None:
            payloads = []
            with contextlib.suppress(BlockingIOError):
                while True:
                    payloads.append(receiver.recv(MAX_DATAGRAM).decode("ascii", "replace"))
            if payloads:
                on_wake(woken_for(*payloads))

        loop.add_reader(receiver.fileno(), read)
        try:
            yield
        finally:
            loop.remove_reader(receiver.fileno())
            receiver.close()
            self._own.discard(name)
            with contextlib.suppress(OSError):
                (self.directory / name).unlink()

    def _ours(self) -> bool:
        """The directory exists, belongs to this user, and no one else may enter it."""
        try:
            status = self.directory.stat()
        except OSError:
            return False
        return status.st_uid == os.getuid() and not status.st_mode & 0o077

    def close(self) -> None:
        if self._sender is not None:
            self._sender.close()
            self._sender = None
