"""Request dependencies: the parts of the running system (`app.runtime.Runtime`) that the
lifespan put on `app.state`.

Every dependency is `async def` though none awaits: FastAPI runs a plain `def` in its
thread pool, and each of those hops to another thread and back waited for the interpreter
lock while the worker drained on a thread of this process (tests/api/test_routes_on_the_loop.py).
"""

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from app.api.middleware.submit_rate import SubmitRate
from app.fetch.guard import Destinations
from app.runtime import Runtime
from app.settings import Settings
from app.store.crawls import CrawlStore
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.reads import ContentStore
from app.store.workers import WorkerStore


def _running(request: Request) -> Runtime:
    running: Runtime = request.app.state.runtime
    return running


# Each dependency reads the runtime itself rather than depending on a `runtime` dependency:
# FastAPI solves every dependency of a request anew (a cache key, a signature walk each), and
# a level less per part is a measurable share of a POST's CPU (docs/design/api.md).
async def runtime(request: Request) -> Runtime:
    return _running(request)


RuntimeDep = Annotated[Runtime, Depends(runtime)]


async def _jobs(request: Request) -> JobStore:
    return _running(request).jobs


async def _settings(request: Request) -> Settings:
    return _running(request).settings


async def _destinations(request: Request) -> Destinations:
    return _running(request).destinations


async def _database(request: Request) -> Database:
    return _running(request).database


async def _domains(request: Request) -> DomainStore:
    return _running(request).domains


async def _deliveries(request: Request) -> DeliveryStore:
    return _running(request).deliveries


async def _contents(request: Request) -> ContentStore:
    return _running(request).contents


async def _workers(request: Request) -> WorkerStore:
    return _running(request).workers


async def _crawls(request: Request) -> CrawlStore:
    return _running(request).crawls


@dataclass(frozen=True)
class Submitting:
    """What a submit needs, as one dependency (the busiest route pays for each one)."""

    jobs: JobStore
    settings: Settings
    destinations: Destinations
    rate: SubmitRate


async def _submitting(request: Request) -> Submitting:
    running = _running(request)
    return Submitting(
        running.jobs, running.settings, running.destinations, request.app.state.submit_rate
    )


JobsDep = Annotated[JobStore, Depends(_jobs)]
SubmittingDep = Annotated[Submitting, Depends(_submitting)]
SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
DestinationsDep = Annotated[Destinations, Depends(_destinations)]
DomainsDep = Annotated[DomainStore, Depends(_domains)]
DeliveriesDep = Annotated[DeliveryStore, Depends(_deliveries)]
ContentsDep = Annotated[ContentStore, Depends(_contents)]
WorkersDep = Annotated[WorkerStore, Depends(_workers)]
CrawlsDep = Annotated[CrawlStore, Depends(_crawls)]
