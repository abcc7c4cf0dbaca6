"""Pure: numbers and errors as the log lines and messages say them.

A count reads right whatever it is ("1 in-flight job", "2 in-flight jobs"), and a duration
is short ("60s", "55.2s"). Every sentence that carries a number goes through here, and every
log line that names an error (`error_line`).
"""


def counted(number: int, noun: str) -> str:
    """`number` and `noun`, plural unless the number is one: `counted(1, "job")` is "1 job".

    Every noun the service counts makes its plural with an "s".
    """
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def seconds(value: float) -> str:
    """A duration to a tenth of a second, without trailing zeros: "60s", "55.2s"."""
    return f"{value:.1f}".rstrip("0").rstrip(".") + "s"


def error_line(exc: BaseException) -> str:
    """An error in one log line: its type and the first line of its message (a database
    error's driver message, without SQLAlchemy's statement and parameters)."""
    cause = getattr(exc, "orig", None) or exc
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0][:300]}" if lines else type(cause).__name__
