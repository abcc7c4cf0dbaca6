"""Which database runs is asked in one place: no module of app/ outside the backends tests it."""

from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

WHERE_BACKENDS_DIFFER = APP / "store" / "backends"
"""Each backend's package, and the Protocol they share: the only code that may know which it is."""

PICKER = APP / "store" / "backends" / "__init__.py"
"""The module of `backend_for`, the one function that picks the backend for a URL."""

FROZEN = APP / "store" / "migrations"
"""Alembic's revisions (and env.py): history, left as it was written."""

TESTS_OF_THE_BACKEND = ("binds_lists", "dialect.name", "look_before_claiming")
"""What asking which database runs has looked like: a helper, a connection's dialect, a flag."""


def allowed(path: Path) -> bool:
    return path == PICKER or any(
        path.is_relative_to(place) for place in (WHERE_BACKENDS_DIFFER, FROZEN)
    )


def test_no_module_outside_the_backends_asks_which_database_runs():
    """Sequences call a backend's statements by name: none of app/ names a backend test."""
    found = [
        f"{path.relative_to(APP.parent)}:{number}: {needle}"
        for path in sorted(APP.rglob("*.py"))
        if not allowed(path)
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        for needle in TESTS_OF_THE_BACKEND
        if needle in line
    ]
    assert [] == found


def test_the_picker_is_where_the_backends_are():
    """`backend_for` is the one place that picks, and it lives beside the backends."""
    assert "def backend_for(" in PICKER.read_text()
    assert [] == [
        path.name
        for path in sorted((APP / "store").glob("*.py"))
        if "def backend_for(" in path.read_text()
    ]
