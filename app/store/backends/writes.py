"""Many rows' writes as the store hands them to a backend (`NewRows`) and gets them back
prepared to run (`Writes`): the values both backends take and give, apart from either."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import sqlalchemy as sa


@dataclass(frozen=True)
class NewRows:
    """Rows to insert into `table` (`Backend.insert_and_wake`), each a dict of the same
    columns; with `skip_existing`, a row whose key exists is skipped."""

    table: sa.Table
    rows: Sequence[dict[str, Any]]
    skip_existing: bool = False


class Writes(Protocol):
    """Statements of many rows, compiled and bound (`Backend.updates`, `Backend.inserts`),
    to run in a write transaction."""

    def run(self, conn: sa.Connection) -> None: ...


Updates = Callable[[sa.Update, Sequence[dict[str, Any]]], Writes]
"""`Backend.updates`: a statement once per row of parameters, compiled and bound."""


@dataclass(frozen=True)
class InTurn:
    """Writes run one after the other."""

    writes: Sequence[Writes]

    def run(self, conn: sa.Connection) -> None:
        for writes in self.writes:
            writes.run(conn)


@dataclass(frozen=True)
class Once:
    """One statement, run once with its parameters."""

    statement: sa.Executable
    params: dict[str, Any]

    def run(self, conn: sa.Connection) -> None:
        conn.execute(self.statement, self.params)
