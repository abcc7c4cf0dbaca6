"""How the operators' commands print: Rich tables for people, times as `03:13:04 (in 42s)`.

Fetched strings (a title, an error's message, a content type) are the remote side's: every
cell is printed through `printable`, so a control character shows as an escape (`\\x1b`)
instead of driving the terminal (colours, hidden text, its title, OSC 52's clipboard).

Every table fits the width it is given (the terminal's, else `COLUMNS`, else 200): each
table lists, in order, the steps that make it narrower (drop a low-value column; let a
column shrink to a floor, a URL losing its middle, an id becoming its first characters)
and takes as few as it needs. `--wide` takes none and prints every column whole.
"""

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from app.model import JobStatus
from app.store.domains import DomainOverview
from app.store.reads import Version
from app.store.tables import Attempt, Job
from app.store.workers import WorkerSeen
from app.text.wording import distinct_prefix

PIPED_WIDTH = 200
"""Output that goes to no terminal, with no COLUMNS: a width that holds most rows whole."""
WIDE = 10_000
"""The width of `--wide` output: no table is cut to it."""
SHORT_SHA256 = 12
"""Hex digits of a text's sha256 shown: enough to tell a job's versions apart."""
GAP = 3
"""Cells between two columns of `plain_table`."""


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0, DEL and C1 control characters, and the bidirectional marks, embeddings, overrides
and isolates, which reorder what a terminal shows."""


def printable(text: str) -> str:
    """`text` with each control character (`_CONTROL`) escaped as Python writes it: ESC as
    `\\x1b`, a newline as `\\n`, RIGHT-TO-LEFT OVERRIDE as `\\u202e`. Other characters,
    backslashes included, are left as they are."""
    # repr escapes each of them, none being printable to Python either.
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def printable_lines(text: str) -> str:
    """`text` as `printable` shows it, its newlines and tabs kept: a page's text or Markdown
    printed as lines, with no character that drives the terminal."""
    return "\n".join(
        "\t".join(printable(cell) for cell in line.split("\t")) for line in text.split("\n")
    )


def plain_table(**options: Any) -> Table:
    return Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, **options)


def new_console(wide: bool = False) -> Console:
    if wide:
        return Console(highlight=False, width=WIDE)
    console = Console(highlight=False)  # a terminal's width, or COLUMNS
    if console.is_terminal or os.environ.get("COLUMNS", "").isdigit():
        return console
    return Console(highlight=False, width=PIPED_WIDTH)


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


def shorten(text: str, width: int) -> str:
    """Cut the middle out: a URL's host and its last characters say the most."""
    if len(text) <= width:
        return text
    tail = width // 3
    return f"{text[: width - tail - 1]}…{text[-tail:]}"


def cut_end(text: str, width: int) -> str:
    return text if len(text) <= width else f"{text[: width - 1]}…"


def short_ids(length: int) -> Callable[[str, int], str]:
    """A cut for a column of ids: an id whole if it fits, else its first `length`
    characters (`distinct_prefix` of the column: which the commands accept)."""
    return lambda job_id, width: job_id if len(job_id) <= width else job_id[:length]


@dataclass(frozen=True)
class Column:
    header: str
    cells: list[str]
    cut: Callable[[str, int], str] = cut_end
    justify: JustifyMethod = "left"

    @property
    def natural(self) -> int:
        return max(map(cell_len, [self.header, *self.cells]))


@dataclass(frozen=True)
class Drop:
    header: str


@dataclass(frozen=True)
class Shrink:
    header: str
    floor: int


Step = Drop | Shrink


def fitted(columns: Sequence[Column], steps: Sequence[Step], width: int | None) -> Table:
    """A table of `columns` at most `width` cells wide: `steps` are taken in order until it
    fits (if none suffices, Rich cuts it further). The room left goes back to the shrunk
    columns, the one shrunk last (the least willing) first. None: every column whole."""
    columns = [replace(c, cells=[printable(cell) for cell in c.cells]) for c in columns]
    shown = {column.header: column for column in columns}
    floors: dict[str, int] = {}
    room = 0
    if width is not None:
        for step in [None, *steps]:
            if isinstance(step, Drop):
                shown.pop(step.header, None)
                floors.pop(step.header, None)
            elif isinstance(step, Shrink) and step.header in shown:
                floors.pop(step.header, None)  # to the end: now the last shrunk
                floors[step.header] = min(step.floor, shown[step.header].natural)
            used = sum(floors.get(h, c.natural) for h, c in shown.items())
            room = width - used - GAP * (len(shown) - 1)
            if room >= 0:
                break
    widths = {header: column.natural for header, column in shown.items()}
    for header in reversed(floors):
        widths[header] = floors[header] + max(0, min(room, widths[header] - floors[header]))
        room -= widths[header] - floors[header]
    table = plain_table()
    for header, column in shown.items():
        table.add_column(header, justify=column.justify, no_wrap=True, overflow="ellipsis")
    kept = list(shown.values())
    for i in range(len(columns[0].cells) if columns else 0):
        cells = [c.cut(c.cells[i], widths[c.header]) for c in kept]
        table.add_row(*_row(*cells))
    return table


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


def blocked_by(job: Job, now: datetime) -> str:
    """`domain_paused (in 2m05s)`, `domain_at_limit`, or `-`: what holds a pending job
    back, in the API's words, and for how long."""
    blocked = job.blocked_by
    if blocked is None:
        return "-"
    if blocked.until is None:
        return blocked.reason
    return f"{blocked.reason} (in {span((blocked.until - now).total_seconds())})"


def _blocked_in_full(job: Job, now: datetime) -> str:
    """`domain_paused until 03:14:05 (in 2m05s): HTTP 429, Retry-After 120s`."""
    blocked = job.blocked_by
    if blocked is None:
        return "-"
    text = str(blocked.reason)
    if blocked.until is not None:
        text += f" until {when(blocked.until, now)}"
    return text + (f": {blocked.detail}" if blocked.detail else "")


def _row(*values: object) -> list[Text]:
    # Text, not str: a URL with [brackets] must not be read as Rich markup.
    return [Text("-" if value is None else printable(str(value))) for value in values]


def jobs_table(items: Sequence[Job], now: datetime, width: int | None) -> Table:
    id_length = distinct_prefix([job.id for job in items])

    def column(header: str, cell: Callable[[Job], str], **options: Any) -> Column:
        return Column(header, [cell(job) for job in items], **options)

    columns = [
        column("ID", lambda job: job.id, cut=short_ids(id_length)),
        column("URL", lambda job: job.url, cut=shorten),
        column("STATUS", _status),
        column("ATTEMPTS", lambda job: f"{job.attempts}/{job.max_attempts}"),
        column("BLOCKED BY", lambda job: blocked_by(job, now)),
        column("LAST ERROR", _last_error),
        column("TENANT", lambda job: job.tenant),
        column("CREATED (UTC)", lambda job: job.created_at.strftime("%Y-%m-%d %H:%M:%S")),
    ]
    steps: list[Step] = [
        Shrink("URL", 50),
        Shrink("URL", 40),
        Drop("CREATED (UTC)"),
        Drop("TENANT"),
        Shrink("ID", id_length),
        Shrink("URL", 30),
        Drop("BLOCKED BY"),
        Drop("ATTEMPTS"),
        Shrink("URL", 16),
        Shrink("LAST ERROR", 20),
    ]
    return fitted(columns, steps, width)


def job_details(job: Job, now: datetime) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
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
        "blocked by": _blocked_in_full(job, now),
        "last error": error,
        "result": result,
        **_versioning(job, now),
        "created": when(job.created_at, now),
        "started": when(job.started_at, now),
        "finished": when(job.finished_at, now),
    }
    for name, value in rows.items():
        grid.add_row(*_row(name, value))
    return grid


def _versioning(job: Job, now: datetime) -> dict[str, str]:
    """The rows of a job's content version and its refresh schedule, those it has."""
    rows = {}
    if job.content_version is not None:
        rows["version"] = f"{job.content_version}, changed {when(job.changed_at, now)}"
    if job.refresh_every is not None:
        rows["refreshes"] = f"every {span(job.refresh_every)}"
        if job.refresh_at is not None:
            rows["refreshes"] += f", next {when(job.refresh_at, now)}"
    return rows


def attempts_table(history: Sequence[Attempt], width: int | None) -> Table:
    def column(header: str, cell: Callable[[Attempt], object], **options: Any) -> Column:
        return Column(header, [_text(cell(attempt)) for attempt in history], **options)

    columns = [
        column("#", lambda a: a.number, justify="right"),
        column("STARTED (UTC)", lambda a: a.started_at.strftime("%Y-%m-%d %H:%M:%S")),
        column("MS", lambda a: a.duration_ms, justify="right"),
        column("OUTCOME", lambda a: a.outcome or "running"),
        column("ERROR", lambda a: a.error_type),
        column("HTTP", lambda a: a.http_status),
        column("NEXT RETRY (UTC)", lambda a: a.next_retry_at and a.next_retry_at.strftime("%T")),
        column("WORKER", lambda a: a.worker_id),
        column("MESSAGE", lambda a: a.message),
    ]
    steps: list[Step] = [
        Shrink("MESSAGE", 24),
        Drop("WORKER"),
        Drop("MESSAGE"),
        Drop("MS"),
        Shrink("ERROR", 12),
    ]
    table = fitted(columns, steps, width)
    table.title, table.title_justify = "\nattempts", "left"
    return table


def versions_table(items: Sequence[Version], width: int | None) -> Table:
    def column(header: str, cell: Callable[[Version], object], **options: Any) -> Column:
        return Column(header, [_text(cell(version)) for version in items], **options)

    columns = [
        column("VERSION", lambda v: v.version, justify="right"),
        column("STORED (UTC)", lambda v: v.stored_at.strftime("%Y-%m-%d %H:%M:%S")),
        column("BYTES", lambda v: v.bytes, justify="right"),
        column("TEXT LENGTH", lambda v: v.text_length, justify="right"),
        column("TEXT SHA256", lambda v: v.text_sha256 and v.text_sha256[:SHORT_SHA256]),
        column("TITLE", lambda v: v.title),
    ]
    steps: list[Step] = [
        Shrink("TITLE", 30),
        Drop("TEXT LENGTH"),
        Shrink("TITLE", 12),
        Drop("BYTES"),
    ]
    return fitted(columns, steps, width)


def domains_table(items: Sequence[DomainOverview], now: datetime, width: int | None) -> Table:
    def column(header: str, cell: Callable[[DomainOverview], object], **options: Any) -> Column:
        return Column(header, [_text(cell(item)) for item in items], **options)

    def oldest(item: DomainOverview) -> str | None:
        age = item.oldest_pending_age_seconds
        return None if age is None else span(age)

    columns = [
        column("DOMAIN", lambda d: d.domain, cut=shorten),
        column("PAUSED UNTIL (UTC)", lambda d: when(d.paused_until, now)),
        column("REASON", lambda d: d.pause_reason),
        column("FAILURES", lambda d: d.consecutive_failures, justify="right"),
        column("IN FLIGHT", lambda d: d.in_flight, justify="right"),
        column("PENDING", lambda d: d.pending, justify="right"),
        column("OLDEST PENDING", oldest, justify="right"),
    ]
    steps: list[Step] = [
        Shrink("REASON", 30),
        Drop("OLDEST PENDING"),
        Shrink("DOMAIN", 30),
        Shrink("REASON", 12),
        Shrink("DOMAIN", 16),
        Drop("FAILURES"),
    ]
    return fitted(columns, steps, width)


def workers_table(items: Sequence[WorkerSeen], now: datetime, width: int | None) -> Table:
    def column(header: str, cell: Callable[[WorkerSeen], object], **options: Any) -> Column:
        return Column(header, [_text(cell(item)) for item in items], **options)

    def seen(worker: WorkerSeen) -> str:
        return f"{span((now - worker.last_heartbeat_at).total_seconds())} ago"

    columns = [
        column("WORKER", lambda w: w.id),
        column("STATE", lambda w: w.state),
        column("RUNNING", lambda w: f"{w.running}/{w.slots}", justify="right"),
        column("QUEUED", lambda w: w.queued, justify="right"),
        column("LAST SEEN", seen, justify="right"),
        column("STARTED (UTC)", lambda w: w.started_at.strftime("%Y-%m-%d %H:%M:%S")),
        column("VERSION", lambda w: w.version),
    ]
    steps: list[Step] = [
        Shrink("WORKER", 36),
        Drop("VERSION"),
        Drop("STARTED (UTC)"),
        Shrink("WORKER", 24),
    ]
    return fitted(columns, steps, width)


def _text(value: object) -> str:
    return "-" if value is None else str(value)
