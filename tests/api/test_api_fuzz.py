"""API fuzzing: Schemathesis generates requests for every operation of openapi.yaml, valid
and invalid ones, sends them to the live app (its lifespan running, on both backends, as an
admin) and checks each answer: never a 5xx, a status the schema lists for the operation, the
content type it declares, a body that matches its schema.

The app runs on an event loop of its own (an anyio portal) as in every API test, through
httpx's ASGI transport: no port. Each case is prepared by `requests` from Schemathesis's
own serialization and sent as bytes, so what the app receives is what Schemathesis made.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
import requests
import schemathesis
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from schemathesis.checks import CheckFunction
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from app.settings import Settings
from tests.conftest import running_app

ADMIN_KEY = "f" * 32
OPENAPI = Path(__file__).parents[2] / "openapi.yaml"
EXAMPLES_PER_OPERATION = 20

schema = schemathesis.openapi.from_path(OPENAPI)
schema.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
    max_examples=EXAMPLES_PER_OPERATION,
)

CHECKS: list[CheckFunction] = [
    schemathesis.checks.not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@dataclass
class LiveApp:
    """The running app, called from the (synchronous) Hypothesis test."""

    portal: BlockingPortal
    client: httpx.AsyncClient

    def send(self, case: schemathesis.Case) -> httpx.Response:
        # The admin's key in place of whatever the case put there: a wrong key is a 401 of
        # the auth layer, the same for every route, and would hide the route's own answers.
        kwargs = case.as_transport_kwargs(
            base_url="http://ingest", headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        prepared = requests.Request(**_requests_arguments(kwargs)).prepare()
        assert prepared.url is not None and prepared.method is not None
        body = cast(bytes | str | None, prepared.body)  # a case's body, prepared: never a stream
        return self.portal.call(
            _request, self.client, prepared.method, prepared.url, prepared.headers, body
        )


def _requests_arguments(kwargs: dict[str, Any]) -> dict[str, Any]:
    known = {"method", "url", "headers", "params", "cookies", "data", "json", "files", "auth"}
    return {key: value for key, value in kwargs.items() if key in known}


async def _request(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    headers: Any,
    body: bytes | str | None,
) -> httpx.Response:
    response = await client.request(method, url, headers=dict(headers), content=body)
    await response.aread()
    return response


@pytest.fixture
def live_app(make_settings: Callable[..., Settings]) -> Iterator[LiveApp]:
    """The app with its lifespan running (no worker), the admin's key configured."""
    app_settings = make_settings(worker_enabled=False, api_keys={ADMIN_KEY: "*"})
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(running_app(app_settings)) as (_, client),
    ):
        yield LiveApp(portal, client)


@schema.parametrize()
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_no_generated_request_breaks_the_api(case: schemathesis.Case, live_app: LiveApp) -> None:
    """Any generated request, valid or not, gets a documented answer: no 5xx, a listed
    status, the declared content type, a body that matches the schema."""
    response = live_app.send(case)
    case.validate_response(response, checks=CHECKS)
