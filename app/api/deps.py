"""Request dependencies: the parts of the running system (`app.runtime.Runtime`) that the
lifespan put on `app.state`."""

from typing import Annotated

from fastapi import Depends, Request

from app.runtime import Runtime
from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore
from app.store.reads import ContentStore
from app.store.workers import WorkerStore


def runtime(request: Request) -> Runtime:
    running: Runtime = request.app.state.runtime
    return running


RuntimeDep = Annotated[Runtime, Depends(runtime)]


def _jobs(running: RuntimeDep) -> JobStore:
    return running.jobs


def _settings(running: RuntimeDep) -> Settings:
    return running.settings


def _database(running: RuntimeDep) -> Database:
    return running.database


def _domains(running: RuntimeDep) -> DomainStore:
    return running.domains


def _deliveries(running: RuntimeDep) -> DeliveryStore:
    return running.deliveries


def _contents(running: RuntimeDep) -> ContentStore:
    return running.contents


def _workers(running: RuntimeDep) -> WorkerStore:
    return running.workers


JobsDep = Annotated[JobStore, Depends(_jobs)]
SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
DomainsDep = Annotated[DomainStore, Depends(_domains)]
DeliveriesDep = Annotated[DeliveryStore, Depends(_deliveries)]
ContentsDep = Annotated[ContentStore, Depends(_contents)]
WorkersDep = Annotated[WorkerStore, Depends(_workers)]
