"""app.cli.settings_check: unknown INGEST_* names and invalid values, each said with the
variable it is about and what that variable accepts."""

import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from app.cli.settings_check import (
    TEST_PREFIX,
    accepted,
    invalid_values,
    unknown_variables,
    variable,
)
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No INGEST_* variable of the surrounding shell leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("INGEST_"):
            monkeypatch.delenv(name)


def refused(monkeypatch: pytest.MonkeyPatch, **env: str) -> list[str]:
    """The problems said of the settings these variables make."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError) as caught:
        Settings(_env_file=None)
    return invalid_values(caught.value)


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        (
            "INGEST_WORKER_CONCURRENCY",
            "abc",
            "INGEST_WORKER_CONCURRENCY=abc: expected an integer from 1 to 1000",
        ),
        (
            "INGEST_WORKER_CONCURRENCY",
            "1001",
            "INGEST_WORKER_CONCURRENCY=1001: expected an integer from 1 to 1000",
        ),
        (
            "INGEST_MAX_REQUEST_BYTES",
            "1000",
            "INGEST_MAX_REQUEST_BYTES=1000: expected an integer at least 1024",
        ),
        ("INGEST_LEASE_SECONDS", "0.1", "INGEST_LEASE_SECONDS=0.1: expected a number at least 0.5"),
        (
            "INGEST_POLL_INTERVAL_SECONDS",
            "0",
            "INGEST_POLL_INTERVAL_SECONDS=0: expected a number above 0",
        ),
        (
            "INGEST_BACKOFF_JITTER",
            "1",
            "INGEST_BACKOFF_JITTER=1: expected a number at least 0 and below 1",
        ),
        (
            "INGEST_WORKER_PREFETCH",
            "many",
            "INGEST_WORKER_PREFETCH=many: expected an integer from 0 to 1000, or empty",
        ),
        ("INGEST_ACCESS_LOG", "maybe", "INGEST_ACCESS_LOG=maybe: expected true or false"),
        ("INGEST_LOG_FORMAT", "xml", "INGEST_LOG_FORMAT=xml: expected text or json"),
        (
            "INGEST_PORT",
            "\x1b[31m80",
            "INGEST_PORT=\\x1b[31m80: expected an integer from 1 to 65535",
        ),
        (
            "INGEST_ALLOWED_PORTS",
            "http",
            "INGEST_ALLOWED_PORTS: bad port range 'http'; expected numbers and ranges "
            "(low-high) from 1 to 65535, comma-separated",
        ),
        (
            "INGEST_BACKOFF_MAX_SECONDS",
            "1",
            "INGEST_BACKOFF_MAX_SECONDS must be >= INGEST_BACKOFF_BASE_SECONDS",
        ),
        (
            "INGEST_TENANT_WEIGHTS",
            "acme:3,globex:0",
            "INGEST_TENANT_WEIGHTS: globex:0: a weight is a whole number from 1 to 100",
        ),
        (
            "INGEST_TENANT_WEIGHTS",
            "acme:3,acme:1",
            "INGEST_TENANT_WEIGHTS: tenant 'acme' is given two weights",
        ),
        (
            "INGEST_TENANT_ROBOTS_TXT",
            "acme:obey,globex:maybe",
            "INGEST_TENANT_ROBOTS_TXT: globex:maybe: a tenant's robots.txt rule is obey or ignore",
        ),
        (
            "INGEST_TENANT_ROBOTS_TXT",
            "acme:obey,acme:ignore",
            "INGEST_TENANT_ROBOTS_TXT: tenant 'acme' is given two rules",
        ),
        ("INGEST_TENANT_ROBOTS_TXT", "obey", "INGEST_TENANT_ROBOTS_TXT: 'obey' is not tenant:rule"),
    ],
)
def test_an_invalid_value_is_said_with_what_the_variable_accepts(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, problem: str
) -> None:
    """What a number, a boolean or a choice accepts comes from the field's constraints;
    a validator's refusal in its own words; control characters are escaped."""
    assert [problem] == refused(monkeypatch, **{name: value})


def test_every_invalid_value_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    problems = refused(monkeypatch, INGEST_MAX_ATTEMPTS="0", INGEST_LOG_FORMAT="xml")
    assert [
        "INGEST_MAX_ATTEMPTS=0: expected an integer from 1 to 100",
        "INGEST_LOG_FORMAT=xml: expected text or json",
    ] == problems


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("INGEST_API_KEYS", "s3cret:tenant"),
        ("INGEST_DATABASE_URL", "postgres ql://ingest:s3cret@db/x"),
    ],
)
def test_a_value_that_may_hold_a_secret_is_not_repeated(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    """Only numbers, booleans and choices are shown with their value."""
    (problem,) = refused(monkeypatch, **{name: value})
    assert problem.startswith(f"{name}: ")
    assert "s3cret" not in problem


def test_what_a_setting_accepts_is_said_only_for_numbers_booleans_and_choices() -> None:
    """Strings, lists and maps have validators of their own, which say what they want."""
    assert None is accepted({"type": "string"})
    assert None is accepted({"type": "array", "items": {"type": "integer"}})
    assert "a, b or c" == accepted({"enum": ["a", "b", "c"], "type": "string"})


def test_every_setting_that_may_be_unset_accepts_an_empty_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`, or empty` is said of every setting whose type admits None: each takes an empty
    variable as unset."""
    properties = Settings.model_json_schema()["properties"]
    optional = [
        field for field, schema in properties.items() if {"type": "null"} in schema.get("anyOf", [])
    ]
    assert optional  # worker_prefetch, extract_processes
    for field in optional:
        monkeypatch.setenv(variable(field), "")
    settings = Settings(_env_file=None)
    assert {field: None for field in optional} == {f: getattr(settings, f) for f in optional}


@pytest.mark.parametrize(
    ("environ", "problems"),
    [
        (
            {"INGEST_WORKER_CONCURENCY": "3", "PATH": "/bin"},
            ["unknown setting INGEST_WORKER_CONCURENCY (did you mean INGEST_WORKER_CONCURRENCY?)"],
        ),
        (
            {"ingest_max_attempt": "3"},
            ["unknown setting INGEST_MAX_ATTEMPT (did you mean INGEST_MAX_ATTEMPTS?)"],
        ),
        ({"INGEST_COLOUR_THEME": "dark"}, ["unknown setting INGEST_COLOUR_THEME"]),
        ({"ingest_max_attempts": "3", "INGEST_WORKER_CONCURRENCY": "3", "MAX_ATTEMPT": "1"}, []),
        ({"INGEST_TEST_POSTGRES_URL": "postgresql://x", "INGEST_TEST_ANYTHING": "1"}, []),
    ],
)
def test_unknown_names_are_said_with_the_setting_they_are_closest_to(
    environ: dict[str, str], problems: list[str]
) -> None:
    """Case does not matter, as for the settings; INGEST_TEST_* is the test suite's; a
    name close to no setting's is said alone."""
    assert problems == unknown_variables(environ, [])


def test_unknown_names_in_the_env_file_say_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`.env` of the working directory is read as the settings read it; a name in both it
    and the environment is said once."""
    (tmp_path / ".env").write_text(
        "INGEST_WORKER_CONCURENCY=3\nINGEST_BLOCKED_HOST=example.com\nOTHER=1\n"
    )
    monkeypatch.chdir(tmp_path)
    assert [
        "unknown setting INGEST_BLOCKED_HOST (did you mean INGEST_BLOCKED_HOSTS?)",
        "unknown setting INGEST_WORKER_CONCURENCY in .env "
        "(did you mean INGEST_WORKER_CONCURRENCY?)",
    ] == unknown_variables({"INGEST_BLOCKED_HOST": "example.com"})


def test_no_setting_is_named_like_the_test_suites_variables() -> None:
    assert [] == [f for f in Settings.model_fields if variable(f).startswith(TEST_PREFIX)]


# Variables read or set: in Python through os.environ, getenv or monkeypatch's setenv; in CI's
# script, the Dockerfile and the Makefile as NAME=value.
_READ_IN_PYTHON = re.compile(
    r"""(?:environ\.get\(|environ\[|getenv\(|setenv\()\s*["'](INGEST_\w+)"""
)
_SET_IN_SHELL = re.compile(r"\b(INGEST_\w+)=")


def test_every_variable_the_repository_sets_or_reads_is_a_setting_or_the_test_suites() -> None:
    """A variable of the tests, the benchmarks or CI named INGEST_* but no setting would be
    refused by every command those start; theirs are INGEST_TEST_*."""
    python = [
        path for folder in ("app", "tests", "bench") for path in ROOT.joinpath(folder).rglob("*.py")
    ]
    named = set()
    for path in [*python, ROOT / ".ci" / "run", ROOT / "Dockerfile", ROOT / "Makefile"]:
        pattern = _READ_IN_PYTHON if path.suffix == ".py" else _SET_IN_SHELL
        named.update(pattern.findall(path.read_text()))
    settings = {variable(field) for field in Settings.model_fields}
    assert {"INGEST_TEST_POSTGRES_URL", "INGEST_DATABASE_URL"} <= named  # the scan finds them
    assert [] == sorted(n for n in named - settings if not n.startswith(TEST_PREFIX))
