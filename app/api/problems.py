"""Errors as RFC 9457 problem details (`application/problem+json`).

Request validation keeps FastAPI's 422 shape; everything else comes through here.

A database that cannot serve now (unreachable, restarting, full, read-only, out of
connections: `app.store.dialect.database_unavailable`) makes any route answer 503 with a
Retry-After, logged in one line: a client retries, an outage does not flood the log with
tracebacks. Any other database error (a bad statement) stays a 500 with its traceback.
"""

import logging
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from app.api.schemas import Problem
from app.store.dialect import database_unavailable
from app.store.jobs import BadCursor, IdempotencyConflict, JobNotFound, StateConflict
from app.strings import shown
from app.wording import error_line

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 5
"""What a 503 asks a client to wait: a database back within seconds is used at once."""

log = logging.getLogger("ingest.api")


def problem(status: int, detail: str | None = None) -> JSONResponse:
    body = Problem(title=HTTPStatus(status).phrase, status=status, detail=detail)
    return JSONResponse(body.model_dump(), status_code=status, media_type=PROBLEM_JSON)


def responses(*statuses: int) -> dict[int | str, dict[str, object]]:
    """OpenAPI entries for the problems an operation can answer."""
    return {
        status: {
            "model": Problem,
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_JSON: {}},
        }
        for status in statuses
    }


def unavailable() -> dict[int | str, dict[str, object]]:
    """The OpenAPI entry of the 503 any route that reads or writes the database can answer."""
    entry = responses(503)
    entry[503]["description"] = "The database cannot serve now; try again after Retry-After"
    entry[503]["headers"] = {
        "Retry-After": {
            "description": "Seconds to wait before trying again",
            "schema": {"type": "integer"},
        }
    }
    return entry


def service_unavailable(detail: str) -> JSONResponse:
    response = problem(503, detail)
    response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own 422, but the input it echoes is what was refused: it may hold lone
        # surrogates, NaN or nesting too deep to serialize, which must not make it a 500.
        return JSONResponse({"detail": jsonable_encoder(shown(exc.errors()))}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        response = problem(exc.status_code, str(exc.detail) if exc.detail else None)
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    async def _unavailable(request: Request, exc: Exception) -> JSONResponse:
        if not database_unavailable(exc):
            raise exc  # a bug, not an outage: the 500 and its traceback
        log.warning(
            "%s %s: database unavailable (%s); answered 503",
            request.method,
            request.url.path,
            error_line(exc),
        )
        return service_unavailable("the database is unavailable; try again shortly")

    for error in (DBAPIError, PoolTimeout, OSError):
        app.add_exception_handler(error, _unavailable)

    @app.exception_handler(JobNotFound)
    async def _not_found(_: Request, exc: JobNotFound) -> JSONResponse:
        return problem(404, f"no job {exc.args[0]}")

    @app.exception_handler(StateConflict)
    async def _conflict(_: Request, exc: StateConflict) -> JSONResponse:
        return problem(409, str(exc))

    @app.exception_handler(IdempotencyConflict)
    async def _idempotency(_: Request, exc: IdempotencyConflict) -> JSONResponse:
        return problem(409, str(exc))

    @app.exception_handler(BadCursor)
    async def _cursor(_: Request, exc: BadCursor) -> JSONResponse:
        return problem(400, str(exc))
