"""No page of this service can be shown inside another site's frame.

A page that frames the dashboard can lay it under a transparent frame and have the operator click
its buttons: the click is a same-origin POST, which `app.api.middleware.cross_site` lets through. So
every response (API, dashboard, docs, errors and refusals) says not to frame it, in both forms
browsers read: `X-Frame-Options: DENY` (older ones) and the Content-Security-Policy `frame-ancestors
'none'` (which takes precedence where both are understood).

A pure ASGI middleware, outermost of the app's own: the refusals of the middlewares inside it
carry the headers too. A 500 from Starlette's server-error middleware, which wraps them all,
does not, and is no page to click.
"""

from typing import Any

NO_FRAMING = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", b"frame-ancestors 'none'"),
]


class NoFraming:
    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def unframeable(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *NO_FRAMING]}
            await send(message)

        await self.app(scope, receive, unframeable)
