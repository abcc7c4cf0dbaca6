"""What the dashboard's pages share: the templates with their filters, the `View` (the
filters, page and refresh an operator chose), which every link and button carries so an
action comes back to the page it was pressed on, and how a job's wait is said. Pure, but for
loading the templates.
"""

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import Depends, Query
from fastapi.templating import Jinja2Templates

from app.model import Blocked, BlockReason

REFRESH_CHOICES = (5, 30)
"""The auto-refresh intervals the page offers (seconds); any from 2 to 3600 is taken."""

templates = Jinja2Templates(directory=Path(__file__).resolve().parents[2] / "templates")


@dataclass(frozen=True)
class View:
    """The overview as an operator set it up."""

    domain: str | None = None
    tenant: str | None = None
    q: str | None = None
    """Search: an id's first characters or part of a URL."""
    refresh: int | None = None
    """Reload every this many seconds; None: only when asked (typing is never wiped)."""
    cursor: str | None = None
    """The dead jobs' page."""

    def url(self, path: str = "/dashboard", **changes: Any) -> str:
        """`path` with this view's parameters (as changed) in its query."""
        chosen = replace(self, **changes)
        params = {
            name: value
            for name, value in [
                ("domain", chosen.domain),
                ("tenant", chosen.tenant),
                ("q", chosen.q),
                ("refresh", chosen.refresh),
                ("cursor", chosen.cursor),
            ]
            if value
        }
        return f"{path}?{urlencode(params)}" if params else path

    def action(self, path: str) -> str:
        """A button's target: `path` with the filters and refresh, to come back to them."""
        return self.url(path, cursor=None)

    @property
    def scope(self) -> str:
        """`of example.com, tenant shop`, `of tenant shop`, or "" with no filter."""
        parts = [self.domain] if self.domain else []
        parts += [f"tenant {self.tenant}"] if self.tenant else []
        return f"of {', '.join(parts)}" if parts else ""


def _clean(value: str | None, lower: bool = False) -> str | None:
    value = (value or "").strip()
    return (value.lower() if lower else value) or None


async def view_of(
    domain: Annotated[str | None, Query(max_length=300)] = None,
    tenant: Annotated[str | None, Query(max_length=100)] = None,
    q: Annotated[str | None, Query(max_length=2048)] = None,
    refresh: Annotated[int | None, Query(ge=2, le=3600)] = None,
    cursor: Annotated[str | None, Query(max_length=200)] = None,
) -> View:
    return View(_clean(domain, lower=True), _clean(tenant), _clean(q), refresh, _clean(cursor))


ViewDep = Annotated[View, Depends(view_of)]


def when(moment: datetime | None) -> str:
    """`2026-11-30 03:12:04 UTC`."""
    return "" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def relative(moment: datetime | None, now: datetime) -> str:
    """`in 42s`, `3m 5s ago`, `now`: how far `moment` is from `now`."""
    if moment is None:
        return ""
    seconds = (moment - now).total_seconds()
    if round(seconds) == 0:
        return "now"
    return f"in {duration(seconds)}" if seconds > 0 else f"{duration(seconds)} ago"


def duration(seconds: float) -> str:
    """`42s`, `3m 5s`, `2d 4h`: the two largest units of a span, rounded to the second."""
    minutes, secs = divmod(round(abs(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    units = [(days, "d"), (hours, "h"), (minutes, "m"), (secs, "s")]
    largest = next((i for i, (value, _) in enumerate(units) if value), len(units) - 1)
    return (
        " ".join(f"{value}{unit}" for value, unit in units[largest : largest + 2] if value) or "0s"
    )


def size(count: int) -> str:
    """`512 B`, `7.7 MB`, `1.2 GB`: a number of bytes in decimal units, to a tenth."""
    if count < 1000:
        return f"{count} B"
    amount, unit = count / 1000, "kB"
    for larger in ("MB", "GB", "TB"):
        if amount < 999.95:
            break
        amount, unit = amount / 1000, larger
    return f"{amount:.1f} {unit}"


def waits_for(blocked: Blocked, domain: str) -> str:
    """`its domain example.com is paused until ... (HTTP 429, ...)`: a reason as a clause."""
    until = when(blocked.until)
    match blocked.reason:
        case BlockReason.DOMAIN_PAUSED:
            why = f" ({blocked.detail})" if blocked.detail else ""
            return f"its domain {domain} is paused until {until}{why}"
        case BlockReason.DOMAIN_AT_LIMIT:
            return f"its domain {domain} runs as many fetches as it may at once"
        case BlockReason.TENANT_AT_LIMIT:
            return "its tenant runs as many jobs as it may at once"
        case BlockReason.DOMAIN_INTERVAL:
            return f"its domain {domain} may start its next fetch at {until}"
        case BlockReason.NOT_DUE:
            return f"it is not due until {until}"


templates.env.filters["when"] = when
templates.env.filters["duration"] = duration
templates.env.filters["size"] = size
templates.env.globals["relative"] = relative
templates.env.globals["refresh_choices"] = REFRESH_CHOICES
templates.env.globals["waits_for"] = waits_for
