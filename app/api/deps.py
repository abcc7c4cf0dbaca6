"""Request dependencies: the stores and settings that the lifespan put on `app.state`."""

from typing import Annotated

from fastapi import Depends, Request

from app.settings import Settings
from app.store.database import Database
from app.store.deliveries import DeliveryStore
from app.store.domains import DomainStore
from app.store.jobs import JobStore


def _jobs(request: Request) -> JobStore:
    return request.app.state.jobs


def _settings(request: Request) -> Settings:
    return request.app.state.settings


def _database(request: Request) -> Database:
    return request.app.state.database


def _domains(request: Request) -> DomainStore:
    return request.app.state.domains


def _deliveries(request: Request) -> DeliveryStore:
    return request.app.state.deliveries


JobsDep = Annotated[JobStore, Depends(_jobs)]
SettingsDep = Annotated[Settings, Depends(_settings)]
DatabaseDep = Annotated[Database, Depends(_database)]
DomainsDep = Annotated[DomainStore, Depends(_domains)]
DeliveriesDep = Annotated[DeliveryStore, Depends(_deliveries)]
