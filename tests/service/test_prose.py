"""app/'s comments and docstrings hold no measurements, no long-module excuses, no long openings.

The prose read is every comment (a run of `#` lines read as one text) and every docstring:
any string that stands alone as a statement (a module's, class's or function's docstring,
and the docstring under a constant). String literals that are arguments or values (messages,
SQL, pydantic Field descriptions) are not read; nor is app/store/migrations/versions/. Spans
in backticks or double quotes are examples of output or code, and are not read either.

`test_no_measurements` refuses a measurement. A figure is a number with a unit of time (ns,
us, ms, s, sec, seconds, minutes) or of size (B, bytes, KB, kB, KiB, MB, MiB, GB, GiB), a
count of rows, jobs, tenants, domains, requests, pages or statements, or a fraction ("a fifth
of"). Refused, one offender per sentence:
- a figure in ns, us or ms (a timing), unless its sentence says it is a default;
- an approximate figure (`~3 ms`, `~40 times`, `~20%`), a spread (`6-9 s`, `840-1,180 KB`),
  or a before and after (`4.4 -> 1.9 ms`, `2 -> 41 ms`);
- a throughput (`1,600 jobs/s`, `6,000 a second`) or a ratio (`0.84x`, `3 times faster`,
  `20% slower`, `twice as much`);
- a count at scale: written with a thousands separator or in k, M, thousands, millions or
  billions (`200,000 rows`, `ten million jobs`, `1 M pending jobs`);
- any figure in a sentence that says it was measured: took, cost, spent, measured, p50, p90,
  p95, p99, median, mean, average, peak, CPU.
Allowed: a constant's or a setting's value stated exactly (`the first 1024 bytes`, `up to 2 KB
a URL`, `30 s by default`, `Python's default is 5 ms`), protocol and library facts (HTTP 429,
RFC 9309, `h11's 100 KiB`). The figures go, dated, into docs/design/<topic>.md, and the code
keeps a line of why and a pointer there.

`test_no_long_module_excuses` refuses a "why one module past N lines" paragraph: a module
that needs one is split instead. `test_module_docstrings_are_short` refuses a module
docstring of more than 15 lines: what the module owns, what it must not do, where the
details live.

Each test prints its offenders as `path:line: text`, one to a line.
"""

import ast
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
SKIPPED = APP / "store" / "migrations" / "versions"
LONGEST_MODULE_DOCSTRING = 15

NUMBER = r"\d+(?:,\d{3})*(?:\.\d+)?"
SUBSECOND = r"(?:ns|us|\u00b5s|ms)\b"
UNIT = r"(?:ns|us|\u00b5s|ms|s|sec|seconds?|minutes?|B|bytes|KB|kB|KiB|MB|MiB|GB|GiB)\b"
COUNTED = r"(?:rows|jobs|tenants|domains|requests|pages|statements)\b"
BIG = (
    rf"(?:\d{{1,3}}(?:,\d{{3}})+|{NUMBER}\s?[kKM]\b"
    rf"|(?:a|one|ten|a few|{NUMBER})\s(?:hundred\s)?(?:thousand|million|billion))"
)
SPREAD = rf"{NUMBER}\s?[-\u2013]\s?{NUMBER}"
FRACTION = r"\b(?:a|one|two|three)\s(?:half|third|quarter|fifth|sixth|eighth|tenth)s?\sof\b"

REFUSED = [
    ("a timing", re.compile(rf"\b(?:{SPREAD}|{NUMBER})\s?{SUBSECOND}")),
    (
        "an approximation",
        re.compile(rf"[~\u2248]\s?(?:{SPREAD}|{NUMBER})\s?(?:{UNIT}|times\b|x\b|%)"),
    ),
    ("a spread", re.compile(rf"\b{SPREAD}\s?{UNIT}")),
    (
        "a before and after",
        re.compile(
            rf"\b(?:\d+\.\d+|{NUMBER}\s?{UNIT})\s?(?:->|\u2192)\s?{NUMBER}"
            rf"|\b{NUMBER}\s?(?:->|\u2192)\s?{NUMBER}\s?{UNIT}"
        ),
    ),
    (
        "a throughput",
        re.compile(rf"\b{NUMBER}\s?[a-zA-Z]*/s\b|\b{BIG}\s(?:\w+\s)?(?:a|per)\ssecond\b"),
    ),
    (
        "a ratio",
        re.compile(
            rf"\b\d+(?:\.\d+)?[x\u00d7](?=[\s.,;:)])"
            rf"|\b(?:{NUMBER}\s?(?:times|%)|twice|half)\s"
            r"(?:as\s\w+|faster|slower|quicker|cheaper|more|less|fewer)\b"
        ),
    ),
    ("a count at scale", re.compile(rf"\b{BIG}\s(?:\w+\s)?{COUNTED}")),
]
DEFAULT = re.compile(r"\bdefaults?\b", re.IGNORECASE)
MEASURED = re.compile(
    r"\b(?:took|costs?|costing|spent|spends?|measured|p50|p90|p95|p99|median|mean|average|peak"
    r"|CPU)\b",
    re.IGNORECASE,
)
FIGURE = re.compile(rf"\b{NUMBER}\s?(?:{UNIT}|(?:\w+\s)?{COUNTED})|{FRACTION}")
EXAMPLE = re.compile(r"`[^`]{0,80}`|\"[^\"]{0,40}\"")
QUOTE_OPENING = re.compile(r"^[rRuU]?(?:\"\"\"|'''|\"|')")
QUOTE_CLOSING = re.compile(r"(?:\"\"\"|'''|\"|')$")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
LONG_MODULE_EXCUSE = re.compile(r"\bwhy (?:one|this) module\b|\bpast \d+ lines\b", re.IGNORECASE)


def modules() -> list[Path]:
    return sorted(path for path in APP.rglob("*.py") if SKIPPED not in path.parents)


def parts() -> list[str]:
    """app/'s top-level modules and packages, one test case each."""
    return sorted({path.relative_to(APP).parts[0] for path in modules()})


def prose(path: Path) -> Iterator[list[tuple[int, str]]]:
    """Each comment (consecutive `#` lines) and docstring of `path`, as (line, text) pairs."""
    source = path.read_text()
    lines = source.splitlines()
    comment: list[tuple[int, str]] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if comment and comment[-1][0] != line - 1:
            yield comment
            comment = []
        comment.append((line, token.string.lstrip("#").strip()))
    if comment:
        yield comment
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            end = node.end_lineno or node.lineno
            piece = [(n, lines[n - 1].strip()) for n in range(node.lineno, end + 1)]
            piece[0] = (piece[0][0], QUOTE_OPENING.sub("", piece[0][1]))
            piece[-1] = (piece[-1][0], QUOTE_CLOSING.sub("", piece[-1][1]))
            yield piece


def measurements_in(piece: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The line of each sentence of `piece` that quotes a measurement (its first figure's)."""
    text = EXAMPLE.sub(lambda match: " " * len(match.group()), " ".join(t for _, t in piece))
    line_starts = []
    offset = 0
    for line, line_text in piece:
        line_starts.append((offset, line, line_text))
        offset += len(line_text) + 1
    offset = 0
    for sentence in SENTENCE_END.split(text):
        offset = text.index(sentence, offset)
        at = refused_at(sentence)
        if at is not None:
            yield next((n, t) for start, n, t in reversed(line_starts) if start <= offset + at)
        offset += len(sentence)


def refused_at(sentence: str) -> int | None:
    """Where in `sentence` its first refused figure starts, or None."""
    for name, pattern in REFUSED:
        match = pattern.search(sentence)
        if match and not (name == "a timing" and DEFAULT.search(sentence)):
            return match.start()
    figure = FIGURE.search(sentence)
    return figure.start() if figure and MEASURED.search(sentence) else None


def offenders(part: str, check: Callable[[Path], Iterator[tuple[int, str]]]) -> list[str]:
    root = APP / part
    paths = [root] if root.suffix == ".py" else [p for p in modules() if root in p.parents]
    found = []
    for path in paths:
        name = path.relative_to(ROOT)
        found += [f"{name}:{line}: {text}" for line, text in check(path)]
    return found


def measurements(path: Path) -> Iterator[tuple[int, str]]:
    for piece in prose(path):
        yield from measurements_in(piece)


def long_module_excuses(path: Path) -> Iterator[tuple[int, str]]:
    for piece in prose(path):
        for line, text in piece:
            if LONG_MODULE_EXCUSE.search(text):
                yield line, text


def long_module_docstring(path: Path) -> Iterator[tuple[int, str]]:
    module = ast.parse(path.read_text())
    first = module.body[0] if module.body else None
    if not (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return
    length = (first.end_lineno or first.lineno) - first.lineno + 1
    if length > LONGEST_MODULE_DOCSTRING:
        yield first.lineno, f"module docstring of {length} lines"


@pytest.mark.parametrize("part", parts())
def test_no_measurements(part: str) -> None:
    """No comment or docstring of app/ quotes a measurement (see the module's docstring)."""
    found = offenders(part, measurements)
    assert not found, "measurements belong in docs/design/:\n" + "\n".join(found)


@pytest.mark.parametrize("part", parts())
def test_no_long_module_excuses(part: str) -> None:
    """No comment or docstring of app/ explains why a module is past N lines."""
    found = offenders(part, long_module_excuses)
    assert not found, "split the module instead:\n" + "\n".join(found)


@pytest.mark.parametrize("part", parts())
def test_module_docstrings_are_short(part: str) -> None:
    """No module docstring of app/ is over 15 lines."""
    found = offenders(part, long_module_docstring)
    assert not found, f"over {LONGEST_MODULE_DOCSTRING} lines:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "prose_line",
    [
        "ask it of every tenant (100 tenants, a claim of 32: 4.4 -> 1.9 ms at ten million jobs).",
        "loading the roots costs ~25 ms a time.",
        "a 3.8 MB array held the event loop 7-9 s.",
        "trafilatura costs up to 30 us a tag.",
        "some 6,000 a second for a worker draining 1,600 jobs/s.",
        "this keeps the full mode's F1 at 0.84x its cost.",
        "a scan by the regular expression costs twice as much.",
        "a claim took 0.6 s.",
        "anyio builds its table, which cost a fifth of a fetch's CPU.",
        "with 1 M pending jobs, their min() read every pending row.",
    ],
)
def test_a_measurement_is_refused(prose_line: str) -> None:
    """Each kind of figure the module's docstring names is found."""
    assert [line for line, _ in measurements_in([(7, prose_line)])] == [7]


@pytest.mark.parametrize(
    "prose_line",
    [
        "A fetch is bounded by INGEST_FETCH_TIMEOUT_SECONDS (30 s by default).",
        "Python's default is 5 ms.",
        "The HTML spec's prescan: a <meta charset> must sit in the first 1024 bytes.",
        "A digest, not the URL: up to 2 KB a URL, times ANSWERS_KEPT.",
        "HTTP 429 defers; RFC 9309 2.3.1.2: follow at least five redirects.",
        'A duration to a tenth of a second: "60s", "55.2s".',
        "`350 ms` under a second, else `12.5s`.",
        "The least of 1, 2, 3 or 5 times a power of ten.",
    ],
)
def test_a_constant_or_a_fact_is_allowed(prose_line: str) -> None:
    """A value stated exactly, a protocol fact or an example of output is no measurement."""
    assert list(measurements_in([(7, prose_line)])) == []
