"""The documents that restate the code (.env.example, the docs site, README.md) still agree
with it."""

import inspect
from itertools import pairwise
from pathlib import Path

import pytest

from app.api.app import create_app
from app.cli.reference import env_example_text, pages
from app.rules.policy import backoff_delay
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
ENV_EXAMPLE = ROOT / ".env.example"
README = ROOT / "README.md"
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"


def env_name(field: str) -> str:
    return f"INGEST_{field.upper()}"


def env_example_lines() -> list[str]:
    return ENV_EXAMPLE.read_text().splitlines()


def env_example_values() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in env_example_lines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not a KEY=VALUE line: {line!r}"
            assert key not in values, f"{key} appears twice"
            values[key] = value
    return values


def test_env_example_lists_every_setting_and_nothing_else():
    """.env.example has one line per Settings field and no unknown names."""
    expected = {env_name(field) for field in Settings.model_fields}
    assert expected == set(env_example_values())


def test_env_example_values_are_the_defaults(monkeypatch: pytest.MonkeyPatch):
    """Each .env.example value, parsed as Settings parses it, equals the field's default."""
    for key, value in env_example_values().items():
        monkeypatch.setenv(key, value)
    parsed = Settings(_env_file=None)
    expected = {name: field.default for name, field in Settings.model_fields.items()}
    actual = {name: getattr(parsed, name) for name in Settings.model_fields}
    assert expected == actual


def test_env_example_comments_every_setting():
    """Each setting in .env.example follows a one-line comment."""
    lines = env_example_lines()
    uncommented = [
        line.partition("=")[0]
        for previous, line in pairwise(["", *lines])
        if line.startswith("INGEST_") and not previous.startswith("# ")
    ]
    assert [] == uncommented


def test_the_readme_is_read_in_ten_minutes():
    """README.md stays a start page (about 150 lines); the manual is the docs site."""
    assert len(README.read_text().splitlines()) <= 160


def test_the_retries_page_quotes_the_backoff_formula():
    """docs/concepts/retries.md quotes backoff_delay's formula line verbatim."""
    doc = inspect.getdoc(backoff_delay) or ""
    formulas = [line.strip() for line in doc.splitlines() if line.strip().startswith("delay =")]
    assert len(formulas) == 1, "backoff_delay's docstring should hold one `delay = ...` line"
    assert formulas[0] in (DOCS / "concepts" / "retries.md").read_text()


def test_the_api_page_lists_every_endpoint():
    """docs/api.md's table names every operation of the app as `METHOD /path`."""
    schema = create_app(Settings(_env_file=None, worker_enabled=False)).openapi()
    page = (DOCS / "api.md").read_text()
    missing = [
        f"{method.upper()} {path}"
        for path, operations in schema["paths"].items()
        for method in operations
        if f"`{method.upper()} {path}`" not in page
    ]
    assert [] == missing


def test_the_reference_pages_and_env_example_are_what_the_code_writes():
    """docs/reference/*.md and .env.example are `ingest reference`'s output for this code
    (regenerate: `make reference`)."""
    stale = [name for name, text in pages().items() if (REFERENCE / name).read_text() != text]
    assert [] == stale
    assert env_example_text() == ENV_EXAMPLE.read_text()


def test_every_reference_page_is_in_the_site():
    """The site's nav lists every generated page (a page left out is never read)."""
    nav = (ROOT / "mkdocs.yml").read_text()
    assert [] == [name for name in pages() if f"reference/{name}" not in nav]
