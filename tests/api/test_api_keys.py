"""INGEST_API_KEYS parsing and the constant-time key lookup."""

import pytest
from pydantic import ValidationError

from app.keys import Keys
from app.settings import Settings

A, B = "k" * 16, "z" * 24


def test_keys_parse_from_the_environment(monkeypatch):
    """key:tenant pairs, comma-separated; * marks an admin key."""
    monkeypatch.setenv("INGEST_API_KEYS", f" {A}:acme , {B}:* ")
    assert {A: "acme", B: "*"} == Settings(_env_file=None).api_keys


def test_no_keys_by_default(monkeypatch):
    """Unset means an open service."""
    monkeypatch.delenv("INGEST_API_KEYS", raising=False)
    assert {} == Settings(_env_file=None).api_keys


@pytest.mark.parametrize("value", ["nocolon" * 3, f"{A}:", ":tenant", "short:acme"])
def test_bad_keys_are_rejected(monkeypatch, value):
    """Entries without a tenant, without a key, or with a key under 16 characters fail."""
    monkeypatch.setenv("INGEST_API_KEYS", value)
    with pytest.raises(ValidationError):
        Settings(_env_file=None)


def test_lookup_finds_the_tenant_or_nothing():
    """The presented key maps to its tenant; an unknown or prefix key maps to nothing."""
    keys = Keys.of({A: "acme", B: "*"})
    assert ("acme", "*", None, None) == (
        keys.tenant_of(A),
        keys.tenant_of(B),
        keys.tenant_of(A[:-1]),
        keys.tenant_of(""),
    )


def test_the_admins_alone_know_no_tenant_key():
    """`admins()` keeps the admin keys: a tenant's key is no key of theirs."""
    admins = Keys.of({A: "acme", B: "*"}).admins()
    assert ("*", None, True, False) == (
        admins.tenant_of(B),
        admins.tenant_of(A),
        bool(admins),
        bool(Keys.of({A: "acme"}).admins()),
    )
