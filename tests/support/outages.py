"""Real database outages for tests: a SQLite file on a disk that fills up, a PostgreSQL server
behind a TCP proxy that can be cut.

`outage(database_url, tmp_path)` gives the URL the service should use and a switch:
`await switch.begin()` makes the database unable to serve (SQLite: its disk is full, so
writes fail while reads work; PostgreSQL: connections are refused and open ones dropped),
`await switch.end()` brings it back.
"""

import asyncio
import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

from sqlalchemy.engine import make_url

DISK_BYTES = 16 * 1024 * 1024


class FullDisk:
    """A tmpfs of its own holding the SQLite file; `begin` fills it, `end` frees it."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        self.filler = mount / "filler"

    async def begin(self) -> None:
        await asyncio.to_thread(self._fill)

    def _fill(self) -> None:
        """Write until not one byte more fits: big blocks, then ever smaller ones."""
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            size = 1 << 20
            while size:
                try:
                    os.write(fd, b"\0" * size)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    size //= 2
        finally:
            os.close(fd)

    async def end(self) -> None:
        self.filler.unlink(missing_ok=True)


class CutProxy:
    """A TCP proxy in front of PostgreSQL: `begin` stops listening (new connections are
    refused) and drops the open ones; `end` listens again on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._open: set[asyncio.StreamWriter] = set()

    async def end(self) -> None:
        self._server = await asyncio.start_server(self._pipe, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def begin(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        self._server = None
        for writer in list(self._open):
            writer.transport.abort()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._open |= {writer, up_writer}

        async def copy(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except OSError:
                pass
            finally:
                sink.transport.abort()
                self._open.discard(sink)

        await asyncio.gather(copy(reader, up_writer), copy(up_reader, writer))


@contextlib.asynccontextmanager
async def outage(
    database_url: str, tmp_path: Path
) -> AsyncIterator[tuple[str, FullDisk | CutProxy]]:
    """The URL to give the service, and the switch of its database's outage."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        mount = tmp_path / "disk"
        mount.mkdir()
        mount_tmpfs = ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(mount)]
        await asyncio.to_thread(subprocess.run, mount_tmpfs, check=True)
        try:
            shutil.copy(str(url.database), mount / "ingest.db")
            disk = FullDisk(mount)
            yield f"sqlite:///{mount / 'ingest.db'}", disk
        finally:
            await asyncio.to_thread(subprocess.run, ["umount", "-l", str(mount)], check=False)
        return
    proxy = CutProxy(url.host or "127.0.0.1", url.port or 5432)
    await proxy.end()
    try:
        proxied = url.set(host="127.0.0.1", port=proxy.port)
        yield proxied.render_as_string(hide_password=False), proxy
    finally:
        with contextlib.suppress(AssertionError):
            await proxy.begin()
