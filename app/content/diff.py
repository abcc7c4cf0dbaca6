"""A unified diff of two texts, as `diff -u` writes it: pure, text in and text out.

Only "\\n" ends a line (as for diff: `str.splitlines` would also split at "\\r", form feeds
and U+2028). A last line without one is followed by `\\ No newline at end of file`, so a
changed last line reads as a removed line and an added one, never as one glued line.
The API runs `unified` in processes of its own, under a deadline (app/api/routes/diffs.py): difflib
is Python and its cost can grow with the square of the lines.
"""

import difflib

NO_NEWLINE = "\\ No newline at end of file\n"


def lines(text: str) -> list[str]:
    """`text`'s lines, each with its "\\n" but a last one that has none."""
    parts = text.split("\n")
    last = parts.pop()
    return [part + "\n" for part in parts] + ([last] if last else [])


def line_count(text: str) -> int:
    """How many lines `lines(text)` would give, without making them."""
    return text.count("\n") + (not text.endswith("\n") and text != "")


def unified(old: str, new: str, from_name: str, to_name: str) -> str:
    """The unified diff (3 lines of context) from `old` to `new`; empty when they are equal."""
    out = []
    for line in difflib.unified_diff(lines(old), lines(new), fromfile=from_name, tofile=to_name):
        out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)
