"""`ingest serve` stops cleanly on SIGTERM and SIGINT, and says so: exit 0."""

import shutil
import signal
import socket
from pathlib import Path

from tests.support.processes import ServiceProcess, service


async def stop_by(signum: signal.Signals, process: ServiceProcess) -> None:
    await process.wait_for_line("Application startup complete")
    await process.wait_for_line(" started (")  # its worker runs: the stop drains it
    process.signal(signum)
    assert process.process.wait(timeout=30) == 0, process.text()[-3000:]
    assert "ingest serve stopped" in process.text()


async def test_serve_exits_0_after_sigterm(database_url, tmp_path):
    """Also: `--port 0` takes a free port, whatever INGEST_PORT says (here, a taken one; the
    tests of this file run side by side, and once all bound INGEST_PORT's default)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "serve.log"
        with service("serve", log, database_url, "--port", "0", port=port) as process:
            await stop_by(signal.SIGTERM, process)


async def test_serve_exits_0_after_sigint(sqlite_template: Path, tmp_path):
    """Ctrl-C: the same clean stop (one backend: the signal is the difference here)."""
    shutil.copy(sqlite_template, tmp_path / "ingest.db")
    url = f"sqlite:///{tmp_path / 'ingest.db'}"
    with service("serve", tmp_path / "serve.log", url, "--port", "0") as process:
        await stop_by(signal.SIGINT, process)
