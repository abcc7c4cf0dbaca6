"""Summaries and Markdown tables of the benchmarks' figures.

Pure functions over numbers and strings: no process, database or file is touched here, so
every bench module (and `bench.extraction`, which needs no database) can import it.
"""

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or value != value:  # None or NaN
        return "-"
    return f"{value:,.{digits}f}"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table, first column left-aligned and the others right-aligned."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|---|" + "--:|" * (len(headers) - 1))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
