"""Request dependencies: the parts of the running system (`app.runtime.Runtime`) that the
lifespan put on `app.state`.

Every dependency is `async def` though none awaits: FastAPI runs a plain `def` in its
thread pool, and each of those hops to another thread and back waited for the interpreter
lock while the worker drained on a thread of this process (tests/unit/test_routes_on_the_loop.py).
"""

from typing import Annotated

from fastapi import Depends, Request

from app.api.submit_rate import SubmitRate
from app.fetch.guard import Destinations
from app.runtime import Runtime
from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.reads import ContentStore
from app.store.workers import WorkerStore


async def runtime(request: Request) -> Runtime:
    running: Runtime = request.app.state.runtime
    return running


RuntimeDep = Annotated[Runtime, Depends(runtime)]


async def _jobs(running: RuntimeDep) -> JobStore:
    return running.jobs


async def _settings(running: RuntimeDep) -> Settings:
    return running.settings


async def _destinations(running: RuntimeDep) -> Destinations:
    return running.destinations


async def _database(running: RuntimeDep) -> Database:
    return running.database


async def _domains(running: RuntimeDep) -> DomainStore:
    return running.domains


async def _deliveries(running: RuntimeDep) -> DeliveryStore:
    return running.deliveries


async def _contents(running: RuntimeDep) -> ContentStore:
    return running.contents


async def _workers(running: RuntimeDep) -> WorkerStore:
    return running.workers


async def _submit_rate(request: Request) -> SubmitRate:
    rate: SubmitRate = request.app.state.submit_rate
    return rate


JobsDep = Annotated[JobStore, Depends(_jobs)]
SubmitRateDep = Annotated[SubmitRate, Depends(_submit_rate)]
SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
DestinationsDep = Annotated[Destinations, Depends(_destinations)]
DomainsDep = Annotated[DomainStore, Depends(_domains)]
DeliveriesDep = Annotated[DeliveryStore, Depends(_deliveries)]
ContentsDep = Annotated[ContentStore, Depends(_contents)]
WorkersDep = Annotated[WorkerStore, Depends(_workers)]
