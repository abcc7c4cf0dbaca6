"""Who is calling: API keys map to tenants (`INGEST_API_KEYS`).

With keys set, every route that depends on `CallerDep` needs `Authorization: Bearer <key>`;
a tenant's key sees only its tenant's jobs (others answer 404, so ids cannot be probed),
and a key whose tenant is `*` is an admin that sees every tenant. With no keys the service
is open and every caller is an admin.
"""

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.keys import ADMIN, Keys

_bearer = HTTPBearer(auto_error=False, description="An API key from INGEST_API_KEYS.")


@dataclass(frozen=True)
class Caller:
    tenant: str | None
    """The tenant this caller acts for; None for an admin (or an open service)."""
    key: str | None = None
    """The digest of the key it presented; None on an open service."""

    @property
    def is_admin(self) -> bool:
        return self.tenant is None


async def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    keys: Keys = request.app.state.runtime.keys
    if not keys:
        return Caller(None)
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise HTTPException(401, "an API key is required", {"WWW-Authenticate": "Bearer"})
    found = keys.match(credentials.credentials)
    if found is None:
        raise HTTPException(401, "unknown API key", {"WWW-Authenticate": "Bearer"})
    key, tenant = found
    return Caller(None if tenant == ADMIN else tenant, key)


async def _admin(caller: Annotated[Caller, Depends(_caller)]) -> Caller:
    if not caller.is_admin:
        raise HTTPException(403, "this needs an admin key (tenant *)")
    return caller


CallerDep = Annotated[Caller, Depends(_caller)]
AdminDep = Annotated[Caller, Depends(_admin)]
