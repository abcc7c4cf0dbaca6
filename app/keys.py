"""API keys (INGEST_API_KEYS): which tenant a presented key speaks for.

The one check of a key, made wherever one is asked for: serve's API and dashboard, and a
worker's metrics port. It imports no web framework, so `ingest worker` can make it too.

Keys are held as their SHA-256 digests, and a presented key is compared by its digest
against every one, in constant time each: timing tells neither which key matched nor how
long any key is. A process that checks keys but has no use for them (serve's worker child,
for its metrics port) is handed the admins' digests (`Keys.admins`), never a key.
"""

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

ADMIN = "*"
"""The tenant of an admin key: it sees every tenant."""


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Keys:
    tenants: Mapping[str, str]
    """{SHA-256 hex digest of a key: its tenant}."""

    @classmethod
    def of(cls, api_keys: Mapping[str, str]) -> "Keys":
        """`api_keys` ({key: tenant}, as INGEST_API_KEYS parses) by digest."""
        return cls({digest(key): tenant for key, tenant in api_keys.items()})

    def __bool__(self) -> bool:
        """Whether any key is set: without one, the service is open."""
        return bool(self.tenants)

    def tenant_of(self, given: str) -> str | None:
        """The tenant of the key `given`; None if it is no key of these."""
        found = self.match(given)
        return None if found is None else found[1]

    def match(self, given: str) -> tuple[str, str] | None:
        """The digest and tenant of the key `given`; None if it is no key of these."""
        given_digest = digest(given)
        found = None
        for key_digest, tenant in self.tenants.items():
            if hmac.compare_digest(given_digest, key_digest):
                found = key_digest, tenant
        return found

    def admins(self) -> "Keys":
        """The admin keys alone."""
        return Keys({d: tenant for d, tenant in self.tenants.items() if tenant == ADMIN})
