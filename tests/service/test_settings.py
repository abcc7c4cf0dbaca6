"""app.settings: defaults, INGEST_* parsing, validation, parse_status_codes."""

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from app.settings import DEFAULT_TRANSIENT_ERRORS, Settings, parse_status_codes

DEFAULT_CODES = frozenset({408, *range(500, 600)})


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No INGEST_* variable of the surrounding shell leaks into these tests."""
    for name in list(os.environ):
        if name.upper().startswith("INGEST_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("database_url", "sqlite:///data/ingest.db"),
        ("host", "127.0.0.1"),
        ("port", 8000),
        ("worker_enabled", True),
        ("worker_concurrency", 32),
        ("max_attempts", 4),
        ("backoff_base_seconds", 30.0),
        ("backoff_max_seconds", 300.0),
        ("backoff_jitter", 0.2),
        ("connect_timeout_seconds", 10.0),
        ("read_timeout_seconds", 20.0),
        ("fetch_timeout_seconds", 30.0),
        ("max_redirects", 5),
        ("max_body_bytes", 10 * 1024 * 1024),
        ("user_agent", "ingest/0.1"),
        ("transient_errors", DEFAULT_TRANSIENT_ERRORS),
        ("transient_status_codes", DEFAULT_CODES),
        ("metrics_host", "127.0.0.1"),
        ("metrics_timeout_seconds", 10.0),
    ],
)
def test_defaults(field: str, expected: object) -> None:
    """With no environment, every knob has its documented default."""
    assert expected == getattr(Settings(_env_file=None), field)


def test_default_transient_errors_are_the_documented_names() -> None:
    """The default transient names are the retried branches of the policy tree."""
    expected = (
        "ConnectTimeout",
        "ReadTimeout",
        "WriteTimeout",
        "PoolTimeout",
        "ConnectError",
        "ReadError",
        "WriteError",
        "RemoteProtocolError",
        "FetchTimeout",
    )

    assert expected == Settings(_env_file=None).transient_errors


@pytest.mark.parametrize(
    ("env", "field", "expected"),
    [
        (
            {"INGEST_DATABASE_URL": "postgresql://u@db:5432/x"},
            "database_url",
            "postgresql://u@db:5432/x",
        ),
        ({"INGEST_MAX_ATTEMPTS": "7"}, "max_attempts", 7),
        ({"INGEST_WORKER_CONCURRENCY": "8"}, "worker_concurrency", 8),
        ({"INGEST_WORKER_ENABLED": "false"}, "worker_enabled", False),
        ({"INGEST_BACKOFF_BASE_SECONDS": "0.2"}, "backoff_base_seconds", 0.2),
        (
            {"INGEST_BACKOFF_BASE_SECONDS": "0.25", "INGEST_BACKOFF_MAX_SECONDS": "0.5"},
            "backoff_max_seconds",
            0.5,
        ),
        ({"INGEST_BACKOFF_JITTER": "0"}, "backoff_jitter", 0.0),
        (
            {"INGEST_CONNECT_TIMEOUT_SECONDS": "0.1", "INGEST_FETCH_TIMEOUT_SECONDS": "0.2"},
            "fetch_timeout_seconds",
            0.2,
        ),
        ({"ingest_max_attempts": "3"}, "max_attempts", 3),
    ],
)
def test_env_variables_are_parsed(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], field: str, expected: object
) -> None:
    """INGEST_* variables set the matching field, with floats for sub-second timings."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    assert expected == getattr(Settings(_env_file=None), field)


def test_variables_without_the_prefix_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    """MAX_ATTEMPTS alone does not configure the service."""
    monkeypatch.setenv("MAX_ATTEMPTS", "9")

    assert 4 == Settings(_env_file=None).max_attempts


def test_arguments_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value passed to Settings() overrides the INGEST_* variable."""
    monkeypatch.setenv("INGEST_MAX_ATTEMPTS", "7")

    assert 2 == Settings(_env_file=None, max_attempts=2).max_attempts


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("ReadTimeout", ("ReadTimeout",)),
        ("ReadTimeout,ConnectError", ("ReadTimeout", "ConnectError")),
        (" ReadTimeout , ConnectError ,, ", ("ReadTimeout", "ConnectError")),
        ("", ()),
    ],
)
def test_transient_errors_from_a_comma_separated_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: tuple[str, ...]
) -> None:
    """INGEST_TRANSIENT_ERRORS is a comma-separated list of names; blanks are dropped."""
    monkeypatch.setenv("INGEST_TRANSIENT_ERRORS", value)

    assert expected == Settings(_env_file=None).transient_errors


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("408,500-599", DEFAULT_CODES),
        ("503", frozenset({503})),
        ("502-504, 429", frozenset({429, 502, 503, 504})),
        ("", frozenset()),
    ],
)
def test_transient_status_codes_from_the_variable(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: frozenset[int]
) -> None:
    """INGEST_TRANSIENT_STATUS_CODES takes codes and inclusive ranges."""
    monkeypatch.setenv("INGEST_TRANSIENT_STATUS_CODES", value)

    assert expected == Settings(_env_file=None).transient_status_codes


@pytest.mark.parametrize("value", ["99", "600", "500-400", "abc", "500-600", "5xx", "[503]", "-5"])
def test_bad_transient_status_codes_are_rejected(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    """Codes outside 100-599, reversed ranges and non-numbers fail validation."""
    monkeypatch.setenv("INGEST_TRANSIENT_STATUS_CODES", value)

    with pytest.raises(ValidationError) as info:
        Settings(_env_file=None)

    assert ["transient_status_codes"] == [e["loc"][0] for e in info.value.errors()]


def test_status_codes_as_a_python_value() -> None:
    """A set passed as an argument is taken as is."""
    settings = Settings(_env_file=None, transient_status_codes=frozenset({503}))

    assert frozenset({503}) == settings.transient_status_codes


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"backoff_base_seconds": 60.0, "backoff_max_seconds": 30.0}, id="max<base"),
        pytest.param(
            {"connect_timeout_seconds": 5.0, "fetch_timeout_seconds": 1.0}, id="fetch<connect"
        ),
        pytest.param({"backoff_jitter": 1.0}, id="jitter=1"),
        pytest.param({"backoff_jitter": -0.1}, id="jitter<0"),
        pytest.param({"backoff_base_seconds": 0.0}, id="base=0"),
        pytest.param({"max_attempts": 0}, id="max_attempts=0"),
        pytest.param({"max_attempts": 101}, id="max_attempts=101"),
        pytest.param({"worker_concurrency": 0}, id="concurrency=0"),
        pytest.param({"fetch_timeout_seconds": 0.0}, id="fetch_timeout=0"),
        pytest.param({"max_redirects": -1}, id="max_redirects<0"),
        pytest.param({"max_body_bytes": 0}, id="max_body_bytes=0"),
        pytest.param({"port": 0}, id="port=0"),
        pytest.param({"lease_seconds": 0.4}, id="lease<0.5"),
    ],
)
def test_invalid_values_are_rejected(overrides: dict[str, Any]) -> None:
    """Out-of-range values and inconsistent pairs raise ValidationError."""
    with pytest.raises(ValidationError):
        Settings(_env_file=None, **overrides)


def test_backoff_max_below_base_is_rejected_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cross-field check also applies to values read from INGEST_* variables."""
    monkeypatch.setenv("INGEST_BACKOFF_BASE_SECONDS", "10")
    monkeypatch.setenv("INGEST_BACKOFF_MAX_SECONDS", "5")

    with pytest.raises(
        ValidationError, match="INGEST_BACKOFF_MAX_SECONDS must be >= INGEST_BACKOFF_BASE"
    ):
        Settings(_env_file=None)


@pytest.mark.parametrize(
    "overrides",
    [
        pytest.param({"backoff_base_seconds": 5.0, "backoff_max_seconds": 5.0}, id="max=base"),
        pytest.param(
            {"connect_timeout_seconds": 2.0, "fetch_timeout_seconds": 2.0}, id="fetch=connect"
        ),
        pytest.param({"backoff_jitter": 0.0}, id="jitter=0"),
        pytest.param({"max_redirects": 0}, id="max_redirects=0"),
        pytest.param({"lease_seconds": 0.5}, id="lease=0.5"),
        pytest.param({"lease_seconds": 0.5, "shutdown_grace_seconds": 600.0}, id="grace>lease"),
    ],
)
def test_boundary_values_are_accepted(overrides: dict[str, Any]) -> None:
    """Equal pairs and zero jitter or redirects are valid."""
    settings = Settings(_env_file=None, **overrides)

    assert overrides == {name: getattr(settings, name) for name in overrides}


def test_settings_are_frozen() -> None:
    """A built Settings cannot be changed."""
    settings = Settings(_env_file=None)

    with pytest.raises(ValidationError):
        settings.max_attempts = 9  # type: ignore[misc]


def test_env_file_is_read_unless_disabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A .env in the working directory is read by default and ignored with _env_file=None."""
    (tmp_path / ".env").write_text("INGEST_MAX_ATTEMPTS=9\n")
    monkeypatch.chdir(tmp_path)

    assert (9, 4) == (Settings().max_attempts, Settings(_env_file=None).max_attempts)


# ---- parse_status_codes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("408,500-599", DEFAULT_CODES),
        ("503", frozenset({503})),
        ("100-101", frozenset({100, 101})),
        ("599", frozenset({599})),
        ("500-500", frozenset({500})),
        (" 408 , 500 - 502 ", frozenset({408, 500, 501, 502})),
        ("503,503,500-503", frozenset({500, 501, 502, 503})),
        ("429,", frozenset({429})),
        ("", frozenset()),
        (" , ", frozenset()),
    ],
)
def test_parse_status_codes(value: str, expected: frozenset[int]) -> None:
    """Comma-separated codes and inclusive ranges become one set; blanks are skipped."""
    assert expected == parse_status_codes(value)


@pytest.mark.parametrize(
    "value",
    ["99", "600", "0", "500-400", "500-600", "99-200", "abc", "5xx", "-5", "500-502-504", "1e3"],
)
def test_parse_status_codes_rejects(value: str) -> None:
    """Anything outside 100-599, reversed or non-numeric raises ValueError."""
    with pytest.raises(ValueError):
        parse_status_codes(value)


def test_settings_reach_a_child_process_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """`to_values` -> JSON -> `from_values` (how `ingest serve` hands its settings to its
    worker process) gives the same settings, secrets included, whatever the child's environment
    says; every kind of field is set away from its default."""
    settings = Settings(
        _env_file=None,
        database_url="sqlite:////tmp/elsewhere.db",
        max_attempts=7,
        backoff_base_seconds=0.25,
        worker_process=True,
        worker_prefetch=3,
        transient_errors="ReadTimeout,ConnectError",
        transient_status_codes="502,503",
        allowed_ports="80,8080",
        allowed_hosts="10.0.0.0/8,*.example.org",
        blocked_hosts="bad.example.com",
        allowed_content_types="text/html",
        api_keys="k" * 16 + ":acme," + "a" * 16 + ":*",
        log_format="json",
        webhook_secret="s3cret",
    )
    defaults = Settings(_env_file=None)
    changed = [
        name for name in Settings.model_fields if getattr(settings, name) != getattr(defaults, name)
    ]
    monkeypatch.setenv("INGEST_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("INGEST_WEBHOOK_SECRET", "other")

    received = Settings.from_values(json.loads(json.dumps(settings.to_values())))

    assert len(changed) == 14
    assert received == settings
    assert "s3cret" == received.webhook_secret.get_secret_value()


@pytest.mark.parametrize(
    "values",
    [
        {"database_url": "postgresql://ingest:s3cret@db:notaport/x"},
        {"database_url": "ingest:s3cret@db/x"},
        {"api_keys": "s3cret:shop"},
        {"api_keys": "s3cret"},
    ],
)
def test_a_refused_setting_is_never_repeated(values: dict[str, Any]) -> None:
    """Settings that hold a password or a key are refused without repeating it, a database
    URL that does not parse included (named with its password hidden)."""
    with pytest.raises(ValidationError) as refused:
        Settings(_env_file=None, **values)
    assert "s3cret" not in str(refused.value)
