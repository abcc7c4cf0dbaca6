"""Errors as RFC 9457 problem details (`application/problem+json`).

Request validation keeps FastAPI's 422 shape; everything else comes through here.
"""

from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from app.api.schemas import Problem
from app.store.jobs import BadCursor, IdempotencyConflict, JobNotFound, StateConflict
from app.strings import shown

PROBLEM_JSON = "application/problem+json"


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
