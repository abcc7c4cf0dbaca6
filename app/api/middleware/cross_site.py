"""No state change from another site's page: one rule for the API and the dashboard.

A browser lets any page post a form (or send a simple `fetch`) to this service, and adds
what it holds for it: the HTTP Basic credentials the dashboard asked for, or nothing at all,
which is enough while no API keys are set. So a POST, PUT, PATCH or DELETE that comes from
another site is refused with 403 problem+json: `Sec-Fetch-Site: cross-site`, or an `Origin`
whose host[:port] is not the request's `Host` (`Origin: null` included).

Unless it carries `Authorization: Bearer <key>`: a browser never adds one by itself, and a
page cannot set one on a request to another origin without a CORS preflight, which this
service never grants. Basic credentials do not count: browsers add those unasked. Comparing
with `Host` holds because `app.api.middleware.hosts` has refused any `Host` this service
does not answer to. Details: docs/security.md ("Against other sites' pages").
"""

from typing import Any
from urllib.parse import urlsplit

from starlette.datastructures import Headers

from app.api.problems import problem

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def from_another_site(headers: Headers) -> bool:
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return True
    origin = headers.get("origin")
    if origin is None:
        return False  # not a browser's cross-origin request (curl, scripts, same-origin GETs)
    try:
        netloc = urlsplit(origin).netloc
    except ValueError:
        return True
    return netloc.lower() != headers.get("host", "").lower()


def carries_key(headers: Headers) -> bool:
    scheme, _, key = headers.get("authorization", "").partition(" ")
    return scheme.lower() == "bearer" and bool(key.strip())


class CrossSiteGuard:
    """ASGI middleware: 403 for a state-changing request from another site without a key."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] in STATE_CHANGING:
            headers = Headers(scope=scope)
            if from_another_site(headers) and not carries_key(headers):
                refusal = problem(403, "request from another site; send an API key as Bearer")
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)
