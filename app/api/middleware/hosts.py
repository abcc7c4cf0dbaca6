"""Only requests addressed to this service by a name it answers to: the Host allow-list.

Against DNS rebinding: a page of another site has its name pointed at this service once
loaded, and the browser then sends its requests as the page's own origin, which the
cross-site guard lets through (their `Origin` matches their `Host`). The browser puts the
name it resolved in `Host`, so a request whose `Host` names nothing this service answers to
is refused with 421 Misdirected Request (problem+json) before anything else looks at it,
whatever key it carries.

Answered to: an IP address (a browser sends one only for a page loaded from that address,
and rebinding needs a name); `localhost`; INGEST_HOST (or serve's `--host`) when it is a
name; INGEST_ALLOWED_HOSTNAMES (`*.example.com` for the names under example.com but not
itself, `*` for any). The port is not compared: one published by Docker or a proxy is not
the one listened on. Details: docs/security.md ("Against DNS rebinding").
"""

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers

from app.api.problems import problem
from app.settings import Settings

_HOST_HEADER = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[^\s:@/\[\]]+)(:[0-9]*)?")
MISDIRECTED = 421


@dataclass(frozen=True)
class HostNames:
    """The names this service answers to (besides IP addresses), lower-case."""

    names: frozenset[str]
    suffixes: tuple[str, ...]
    """From `*.example.com`: `.example.com`."""
    any_name: bool = False

    @classmethod
    def of(cls, settings: Settings) -> "HostNames":
        entries = {"localhost", settings.host.lower().rstrip("."), *settings.allowed_hostnames}
        suffixes = tuple(entry[1:] for entry in entries if entry.startswith("*."))
        names = frozenset(entry for entry in entries if not entry.startswith("*"))
        return cls(names, suffixes, any_name="*" in entries)

    def allow(self, host_header: str) -> bool:
        """True if `host_header` (a `Host` header's value) names this service."""
        matched = _HOST_HEADER.fullmatch(host_header.lower())
        if matched is None:
            return False
        name = matched["name"].rstrip(".")
        try:
            ipaddress.ip_address(name.removeprefix("[").removesuffix("]"))
        except ValueError:
            return self.any_name or name in self.names or name.endswith(self.suffixes)
        return True


class AllowedHosts:
    """ASGI middleware: 421 problem+json for a request whose `Host` names another host."""

    def __init__(self, app: Any, hosts: HostNames) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.hosts.allow(Headers(scope=scope).get("host", "")):
            refusal = problem(
                MISDIRECTED,
                "the Host header names no host this service answers to: a name it answers "
                "to must be listed in INGEST_ALLOWED_HOSTNAMES",
            )
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)
