"""The imports of app/ run one way: no module imports one of a higher layer."""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"

LAYERS = [
    ("app", "app.model", "app.settings", "app.keys", "app.clock", "app.text"),
    ("app.rules", "app.content", "app.fetch"),
    ("app.store",),
    ("app.wire", "app.observability", "app.event_loops"),
    ("app.worker",),
    ("app.runtime", "app.part_settings"),
    ("app.api", "app.cli", "app.__main__"),
]
"""Bottom to top: values, settings and the text helpers; the pure rules and fetching;
persistence; what the loops share; the worker and its loops; the composition root (and the
settings each part reads, which it builds); the edges. "app" is the package's face alone: a
module that no entry names has no layer, and the test below fails on it."""

NEVER: dict[str | None, tuple[str, ...]] = {
    "app.store": ("app.rules.policy", "app.content", "app.fetch")
}
"""Persistence stores what it is given: it knows neither how a job is fetched nor decided."""


def module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def group(module: str) -> str | None:
    return max(
        (
            name
            for layer in LAYERS
            for name in layer
            if module == name or (name != "app" and module.startswith(name + "."))
        ),
        key=len,
        default=None,
    )


def layer(module: str) -> int:
    return next(i for i, names in enumerate(LAYERS) if group(module) in names)


def is_module(name: str) -> bool:
    relative = Path(*name.split("."))
    return (APP.parent / relative).with_suffix(".py").exists() or (
        APP.parent / relative / "__init__.py"
    ).exists()


def imports(path: Path) -> set[str]:
    """Every app module `path` imports, at any depth of the file (lazy imports count)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {
                f"{node.module}.{a.name}"
                for a in node.names
                if is_module(f"{node.module}.{a.name}")
            }
    return {name for name in found if name == "app" or name.startswith("app.")}


def test_every_module_has_a_layer():
    """A new module or package must be placed in LAYERS before it can be imported."""
    unplaced = [module_name(p) for p in sorted(APP.rglob("*.py")) if group(module_name(p)) is None]
    assert [] == unplaced


def test_no_import_runs_upward():
    """No module imports one of a higher layer, and the store imports neither policy nor
    fetching."""
    upward = []
    for path in sorted(APP.rglob("*.py")):
        importer = module_name(path)
        for imported in sorted(imports(path)):
            if layer(imported) > layer(importer):
                upward.append(f"{importer} -> {imported}")
            if any(imported.startswith(banned) for banned in NEVER.get(group(importer), ())):
                upward.append(f"{importer} -> {imported} (never)")
    assert [] == upward


SEES_SETTINGS = {"app.settings", "app.wire", "app.worker.process"}
"""Below the composition root, the modules that may name `Settings`: its own, the wire
(the quotas GET /stats shows) and the worker process (which hands the settings to its
child). Every other part takes its own view of them (`app.part_settings`)."""


def test_settings_stop_at_the_composition_root():
    """No module below `app.runtime` imports `Settings`: the root hands each part a view."""
    root = layer("app.runtime")
    seeing = []
    for path in sorted(APP.rglob("*.py")):
        module = module_name(path)
        if layer(module) >= root or module in SEES_SETTINGS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "app.settings":
                if any(alias.name == "Settings" for alias in node.names):
                    seeing.append(module)
    assert [] == seeing
