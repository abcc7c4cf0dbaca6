"""Pure: numbers as the log lines and messages say them.

A count reads right whatever it is ("1 in-flight job", "2 in-flight jobs"), and a duration
is short ("60s", "55.2s"). Every sentence that carries a number goes through here.
"""


def counted(number: int, noun: str) -> str:
    """`number` and `noun`, plural unless the number is one: `counted(1, "job")` is "1 job".

    Every noun the service counts makes its plural with an "s".
    """
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def seconds(value: float) -> str:
    """A duration to a tenth of a second, without trailing zeros: "60s", "55.2s"."""
    return f"{value:.1f}".rstrip("0").rstrip(".") + "s"
