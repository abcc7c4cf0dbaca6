"""Every route and every dependency of one runs on the API's event loop: FastAPI runs a
plain `def` in its thread pool, a hop to another thread and back, and with the worker
draining on a thread of the same process each hop waits for the interpreter lock
(docs/benchmarks.md)."""

import inspect
from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute

from app.api.app import create_app
from app.settings import Settings


def api_routes(routes: list[BaseRoute]) -> Iterator[APIRoute]:
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)  # an included APIRouter
        if included is not None:
            yield from api_routes(included.routes)


def calls(dependant: Dependant) -> Iterator[object]:
    if dependant.call is not None:
        yield dependant.call
    for sub in dependant.dependencies:
        yield from calls(sub)


def runs_on_the_loop(call: object) -> bool:
    method = call if inspect.isroutine(call) else getattr(call, "__call__", None)  # noqa: B004
    return inspect.iscoroutinefunction(method)


def test_no_route_or_dependency_runs_in_the_thread_pool() -> None:
    app = create_app(Settings(database_url="sqlite:///unused.db"))
    routes = list(api_routes(app.router.routes))
    assert {"submit_job", "list_jobs", "get_job", "dashboard"} <= {r.name for r in routes}
    in_threads = {
        f"{route.name}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in calls(route.dependant)
        if not runs_on_the_loop(call)
    }
    assert in_threads == set()


def test_a_plain_function_is_told_apart() -> None:
    def plain() -> None: ...

    async def awaited() -> None: ...

    assert not runs_on_the_loop(plain)
    assert runs_on_the_loop(awaited)
