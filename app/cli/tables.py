"""How the operators' commands print: Rich tables for people, times as `03:13:04 (in 42s)`."""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from app.model import JobStatus
from app.store.tables import Attempt, Job


def plain_table(**options: Any) -> Table:
    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, **options)


def new_console() -> Console:
    console = Console(highlight=False)
    # Piped or captured: whole rows, not the 80 columns Rich assumes without a terminal.
    return console if console.is_terminal else Console(highlight=False, width=200)


def span(seconds: float) -> str:
    """42s, 5m12s, 3h02m, 2d03h."""
    whole = int(abs(seconds))
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    if whole < 86400:
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    return f"{whole // 86400}d{whole % 86400 // 3600:02d}h"


def when(moment: datetime | None, now: datetime) -> str:
    """`03:13:04 (in 42s)`, with the date when it is not today (UTC); `-` for none."""
    if moment is None:
        return "-"
    shown = moment.strftime("%H:%M:%S" if moment.date() == now.date() else "%Y-%m-%d %H:%M:%S")
    delta = (moment - now).total_seconds()
    return f"{shown} (in {span(delta)})" if delta > 0 else f"{shown} ({span(delta)} ago)"


def shorten(url: str, width: int = 50) -> str:
    """Cut the middle out of a long URL: its host and its last characters say the most."""
    if len(url) <= width:
        return url
    tail = width // 3
    return f"{url[: width - tail - 1]}…{url[-tail:]}"


def _status(job: Job) -> str:
    return f"{job.status} ({job.dead_reason})" if job.dead_reason else job.status


def _last_error(job: Job) -> str:
    if job.last_error_kind is None:
        return "-"
    parts = [job.last_error_kind, job.last_error_type or ""]
    if job.last_error_http_status is not None:
        parts.append(str(job.last_error_http_status))
    return " ".join(part for part in parts if part)


def _retry_after(job: Job, now: datetime) -> str:
    # Only a pending job waits; the column is stale on any other (as in the API).
    return when(job.retry_after, now) if job.status == JobStatus.PENDING else "-"


def _row(*values: object) -> list[Text]:
    # Text, not str: a URL with [brackets] must not be read as Rich markup.
    return [Text("-" if value is None else str(value)) for value in values]


def jobs_table(items: Sequence[Job], now: datetime) -> Table:
    table = plain_table()
    table.add_column("ID", no_wrap=True)
    table.add_column("URL", no_wrap=True)
    for header in ("STATUS", "ATTEMPTS", "RETRY AFTER (UTC)", "LAST ERROR"):
        table.add_column(header)
    for job in items:
        table.add_row(
            *_row(
                job.id,
                shorten(job.url),
                _status(job),
                f"{job.attempts}/{job.max_attempts}",
                _retry_after(job, now),
                _last_error(job),
            )
        )
    return table


def job_details(job: Job, now: datetime) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    error = _last_error(job)
    if job.last_error_message:
        error += f": {job.last_error_message}"
    result = "-"
    if job.result_http_status is not None:
        result = f"HTTP {job.result_http_status}, {job.result_bytes} bytes"
        result += f", {job.result_content_type}" if job.result_content_type else ""
        result += f", title {job.result_title!r}" if job.result_title else ""
    rows = {
        "job": job.id,
        "url": job.url,
        "domain": job.domain,
        "tenant": job.tenant,
        "status": _status(job),
        "attempts": f"{job.attempts}/{job.max_attempts} (deferrals {job.deferrals})",
        "priority": job.priority,
        "retry after": _retry_after(job, now),
        "last error": error,
        "result": result,
        "created": when(job.created_at, now),
        "started": when(job.started_at, now),
        "finished": when(job.finished_at, now),
    }
    for name, value in rows.items():
        grid.add_row(*_row(name, value))
    return grid


def attempts_table(history: Sequence[Attempt]) -> Table:
    table = plain_table(title="\nattempts", title_justify="left")
    for header in ("#", "STARTED (UTC)", "MS", "OUTCOME", "ERROR", "HTTP", "NEXT RETRY (UTC)"):
        table.add_column(header, no_wrap=True)
    table.add_column("WORKER")
    for attempt in history:
        table.add_row(
            *_row(
                attempt.number,
                attempt.started_at.strftime("%Y-%m-%d %H:%M:%S"),
                attempt.duration_ms,
                attempt.outcome or "running",
                attempt.error_type,
                attempt.http_status,
                attempt.next_retry_at.strftime("%H:%M:%S") if attempt.next_retry_at else None,
                attempt.worker_id,
            )
        )
    return table
