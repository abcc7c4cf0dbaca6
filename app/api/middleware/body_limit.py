"""INGEST_MAX_REQUEST_BYTES: no request body larger than that is read, let alone parsed.

A pure ASGI middleware, outside everything that reads a body. A `Content-Length` over the
limit is answered 413 at once, before the app runs (so before the API key is looked at:
FastAPI parses a body before it solves the dependencies that check the key). A body without
one (chunked) is counted as it streams in; the read that passes the limit raises a 413
`HTTPException`, which FastAPI's request handler re-raises (any other exception raised while
reading the body becomes a 400) and `app.api.problems` answers as problem+json. Nothing
beyond the limit is buffered.
"""

from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException

from app.api.problems import problem

TOO_LARGE = 413
CLOSE = {"Connection": "close"}
"""The rest of the body is never read: the server must not wait for it, or take it for the
next request on the connection."""


class BodyLimit:
    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse()(scope, receive, send)
            return
        received = 0

        async def counted() -> Any:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HTTPException(TOO_LARGE, self._detail(), CLOSE)
            return message

        await self.app(scope, counted, send)

    def _detail(self) -> str:
        return f"request body is larger than {self.max_bytes} bytes (INGEST_MAX_REQUEST_BYTES)"

    def _refuse(self) -> Any:
        response = problem(TOO_LARGE, self._detail())
        response.headers.update(CLOSE)
        return response
