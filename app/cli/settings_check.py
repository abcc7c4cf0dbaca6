"""The settings a command starts on, refused when one is unknown or invalid: each problem in
words that name the variable and what it accepts, so it is fixed without reading the code.

- An `INGEST_*` name in the environment or in `.env` that names no setting is refused, with
  the setting it is closest to: pydantic-settings ignores it, so a typo
  (INGEST_WORKER_CONCURENCY) would run the service on the default without a word.
  `INGEST_TEST_*` names belong to the test suite (INGEST_TEST_POSTGRES_URL, ...,
  tests/conftest.py) and are never settings: they are left alone.
- A value refused for its type or bounds says what the setting accepts, from the field's
  own JSON schema ("an integer from 1 to 1000"), not from a table that could drift. The
  value itself is repeated only for numbers, booleans and choices of words: no other error
  repeats the value it refused, for settings hold passwords and keys.
- A value one of `app.settings`' validators refuses is said in that validator's words.
"""

import difflib
import os
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError
from pydantic_settings import DotEnvSettingsSource

from app.settings import Settings

PREFIX = Settings.model_config["env_prefix"]
TEST_PREFIX = "INGEST_TEST_"
"""Reserved for the test suite's own variables; no setting's name starts with it."""

_VALIDATORS = {"value_error", "assertion_error"}
"""The error types of the settings' own validators, whose messages say what they want."""


def variable(field: str) -> str:
    """The environment variable of a setting: `worker_concurrency` is INGEST_WORKER_CONCURRENCY."""
    return PREFIX + field.upper()


def unknown_variables(
    environ: Mapping[str, str] = os.environ, dotenv: Iterable[str] | None = None
) -> list[str]:
    """A problem for each `INGEST_*` name that names no setting, in the environment, then in
    `.env` (names are read without regard to case, as the settings are)."""
    if dotenv is None:
        dotenv = DotEnvSettingsSource(Settings).env_vars
    known = sorted(field.upper() for field in Settings.model_fields)
    problems, seen = [], set()
    for where, names in (("", environ), (" in .env", dotenv)):
        for name in map(str.upper, names):
            if not name.startswith(PREFIX) or name.startswith(TEST_PREFIX) or name in seen:
                continue
            seen.add(name)
            # Compared without the prefix every name shares, which would make any two close.
            field = name.removeprefix(PREFIX)
            if field in known:
                continue
            close = difflib.get_close_matches(field, known, n=1)
            hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
            problems.append(f"unknown setting {name}{where}{hint}")
    return problems


def invalid_values(exc: ValidationError) -> list[str]:
    """A problem for each value the settings refused."""
    from app.cli.output import printable  # here: Rich is no import of a command that starts

    properties = Settings.model_json_schema()["properties"]
    problems: list[str] = []
    for error in exc.errors():
        message = error["msg"].removeprefix("Value error, ")
        if not error["loc"]:  # a check of several settings: its message names them
            problem = message
        else:
            field = str(error["loc"][0])
            wanted = None
            if error["type"] not in _VALIDATORS:
                wanted = accepted(properties.get(field, {}))
            if wanted is None:
                problem = f"{variable(field)}: {message}"
            else:
                shown = printable(str(error["input"]))
                problem = f"{variable(field)}={shown}: expected {wanted}"
        if problem not in problems:
            problems.append(problem)
    return problems


def accepted(schema: Mapping[str, Any]) -> str | None:
    """What a setting of this JSON schema accepts, in words: a number within its bounds, a
    boolean or a choice of words, and empty where it may be unset. None for other kinds,
    whose validators say what they want."""
    options = schema.get("anyOf", [schema])
    values = [option for option in options if option.get("type") != "null"]
    if len(values) != 1:
        return None
    words = _kind(values[0])
    nullable = len(values) < len(options)
    return f"{words}, or empty" if words is not None and nullable else words


def _kind(schema: Mapping[str, Any]) -> str | None:
    if "enum" in schema:
        *others, last = [str(choice) for choice in schema["enum"]]
        return f"{', '.join(others)} or {last}" if others else last
    kind = {"integer": "an integer", "number": "a number", "boolean": "true or false"}.get(
        schema.get("type", "")
    )
    if kind is None:
        return None
    bounds = _bounds(schema)
    return f"{kind} {bounds}" if bounds else kind


def _bounds(schema: Mapping[str, Any]) -> str:
    """`from 1 to 1000`, `at least 0.5`, `above 0`, `at least 0 and below 1`, or nothing."""
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"from {_number(low)} to {_number(high)}"
    words = []
    if low is not None:
        words.append(f"at least {_number(low)}")
    if "exclusiveMinimum" in schema:
        words.append(f"above {_number(schema['exclusiveMinimum'])}")
    if high is not None:
        words.append(f"at most {_number(high)}")
    if "exclusiveMaximum" in schema:
        words.append(f"below {_number(schema['exclusiveMaximum'])}")
    return " and ".join(words)


def _number(value: float) -> str:
    """1000, not 1000.0; 0.5 as it is."""
    return str(int(value)) if float(value).is_integer() else str(value)
