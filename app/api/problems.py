"""Errors as RFC 9457 problem details (`application/problem+json`).

Request validation keeps FastAPI's 422 shape, `{"detail": [{type, loc, msg, input?, ctx?}]}`,
but never echoes the refused input whole: FastAPI's own handler encodes each error's `input`,
the entire refused value, which held the event loop for seconds on a large array
(docs/design/api.md). `refusals` shows at most ERRORS_SHOWN errors; of each, an `input` that
is a string cut to EXCERPT_CHARS characters, a number, a boolean or null (a container's
`input` is left out), and a `ctx` whose values are cut the same way. Everything else comes
through here.

A database that cannot serve now (unreachable, restarting, full, read-only, out of
connections: `app.store.outages.database_unavailable`) makes any route answer 503 with a
Retry-After, logged in one line: a client retries, an outage does not flood the log with
tracebacks. Any other database error (a bad statement) stays a 500 with its traceback.
"""

import logging
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from app.api.middleware.submit_rate import SubmitRateExceeded
from app.api.schemas import Problem
from app.store.jobs.errors import BadCursor, IdempotencyConflict, JobNotFound, StateConflict
from app.store.outages import database_unavailable
from app.store.quotas import QuotaExceeded
from app.text.safe_strings import shown
from app.text.wording import error_line

PROBLEM_JSON = "application/problem+json"
RETRY_AFTER_SECONDS = 5
"""What a 503 asks a client to wait: a database back within seconds is used at once."""
ERRORS_SHOWN = 100
EXCERPT_CHARS = 200
_LONGEST_NUMBER: int = 10**EXCERPT_CHARS

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


QUOTA_RETRY_AFTER_SECONDS = 30
"""What a 429 for a tenant's pending quota asks a client to wait: its jobs drain meanwhile."""


def over_quota() -> dict[int | str, dict[str, object]]:
    """The OpenAPI entry of a submit's 429: the tenant's pending jobs are at its quota."""
    return _waiting(
        429,
        "The tenant's pending jobs would pass INGEST_TENANT_MAX_PENDING, or the API key "
        "submits faster than INGEST_KEY_SUBMITS_PER_SECOND; nothing was stored",
    )


def requeue_over_quota() -> dict[int | str, dict[str, object]]:
    """The OpenAPI entry of a retry's or a refresh's 429: the job's tenant's pending jobs
    are at its quota."""
    return _waiting(
        429,
        "The job's tenant has as many pending jobs as INGEST_TENANT_MAX_PENDING allows; the "
        "job was left as it was",
    )


def too_many_diffs() -> dict[int | str, dict[str, object]]:
    """The OpenAPI entry of a `?diff=`'s 429: the key's diffs in flight are at their cap."""
    return _waiting(
        429, "The API key has INGEST_DIFF_PER_KEY diffs in flight already; nothing was diffed"
    )


def unavailable() -> dict[int | str, dict[str, object]]:
    """The OpenAPI entry of the 503 any route that reads or writes the database can answer."""
    return _waiting(503, "The database cannot serve now; try again after Retry-After")


def _waiting(status: int, description: str) -> dict[int | str, dict[str, object]]:
    """A problem's OpenAPI entry that comes with a Retry-After header."""
    entry = responses(status)
    entry[status]["description"] = description
    entry[status]["headers"] = {
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


def refusals(errors: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The `detail` of a 422: the first ERRORS_SHOWN validation errors, each with no more of
    what was refused than an excerpt (see the module's docstring)."""
    shown_errors = []
    for error in errors[:ERRORS_SHOWN]:
        refusal = {"type": error["type"], "loc": shown(error["loc"]), "msg": shown(error["msg"])}
        if "input" in error and _scalar(error["input"]):
            refusal["input"] = _excerpt(error["input"])
        if "ctx" in error:
            refusal["ctx"] = {
                key: _excerpt(value if _scalar(value) else str(value))
                for key, value in error["ctx"].items()
            }
        shown_errors.append(refusal)
    return shown_errors


def _scalar(value: Any) -> bool:
    """A string, a boolean, null, or a number short enough to show as it is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return abs(value) < _LONGEST_NUMBER
    return value is None or isinstance(value, str | bool | float)


def _excerpt(value: str | float | bool | None) -> Any:
    """A string cut to EXCERPT_CHARS characters and made sendable; anything else as is."""
    if isinstance(value, str) and len(value) > EXCERPT_CHARS:
        value = value[: EXCERPT_CHARS - 1] + "…"
    return shown(value)


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": refusals(exc.errors())}, status_code=422)

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

    @app.exception_handler(QuotaExceeded)
    async def _quota(_: Request, exc: QuotaExceeded) -> JSONResponse:
        response = problem(429, str(exc))
        response.headers["Retry-After"] = str(QUOTA_RETRY_AFTER_SECONDS)
        return response

    @app.exception_handler(SubmitRateExceeded)
    async def _submit_rate(_: Request, exc: SubmitRateExceeded) -> JSONResponse:
        response = problem(429, str(exc))
        response.headers["Retry-After"] = str(exc.retry_after)
        return response

    @app.exception_handler(BadCursor)
    async def _cursor(_: Request, exc: BadCursor) -> JSONResponse:
        return problem(400, str(exc))
