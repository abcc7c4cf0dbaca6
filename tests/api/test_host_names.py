"""app.api.middleware.hosts: which Host headers the API answers to, and INGEST_ALLOWED_HOSTNAMES."""

from typing import Any

import pytest
from pydantic import ValidationError

from app.api.middleware.hosts import HostNames
from app.settings import Settings


def names(**settings: Any) -> HostNames:
    return HostNames.of(Settings(_env_file=None, **settings))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "127.0.0.1:8000",
        "localhost",
        "LOCALHOST:8000",
        "localhost.",
        "[::1]",
        "[::1]:8000",
        "10.1.2.3:8080",
        "[::ffff:10.1.2.3]",
    ],
)
def test_addresses_and_localhost_are_answered_by_default(host: str) -> None:
    """Any IP address, and localhost, with or without a port."""
    assert names().allow(host)


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "localhost.evil.example",
        "127.0.0.1.evil.example",
        "2130706433",
        "",
        "user@127.0.0.1",
        "127.0.0.1/x",
        "::1",
        "[localhost]",
        "localhost:8000:1",
    ],
)
def test_any_other_host_is_refused_by_default(host: str) -> None:
    """A name that rebinding could point here, or anything that is not a Host, is refused."""
    assert not names().allow(host)


def test_configured_names_and_the_listen_name_are_answered() -> None:
    """INGEST_ALLOWED_HOSTNAMES names, `*.domain` for the names under it, INGEST_HOST's name."""
    hosts = names(allowed_hostnames="Ingest.Example.com,*.corp.example", host="box.lan")
    allowed = ["ingest.example.com:443", "a.corp.example", "a.b.corp.example", "box.lan:8000"]
    refused = ["example.com", "corp.example", "acorp.example", "evil.example"]
    assert ([True] * 4, [False] * 4) == (
        [hosts.allow(host) for host in allowed],
        [hosts.allow(host) for host in refused],
    )


def test_a_star_answers_any_name() -> None:
    """`*`, for a proxy that checks Host itself, answers to any name (still only a Host)."""
    hosts = names(allowed_hostnames="*")
    assert (True, True, False) == (
        hosts.allow("evil.example"),
        hosts.allow("x:1"),
        hosts.allow("a b"),
    )


@pytest.mark.parametrize(
    "entry", ["example.com:8000", "http://example.com", "*example.com", "bücher.example"]
)
def test_allowed_hostnames_are_names(entry: str) -> None:
    """A port, a URL, a star inside a name or a name not in its xn-- form is refused."""
    with pytest.raises(ValidationError, match="not a host name"):
        Settings(_env_file=None, allowed_hostnames=entry)
