"""The extractors `bench.extraction` compares, each loaded by name behind one call shape:
`extract(body, url) -> text or None`, run inside `active()`.

Only `ingest` needs `active()`: two checkouts both name their package `app`, so each
checkout's modules are imported apart (its root first on sys.path, any other `app` modules
out of sys.modules) and put back in sys.modules only around its own calls, where an import
made at call time then finds its own checkout. The swap is outside the timed call.
A candidate whose package is missing raises ImportError when loaded.
"""

import contextlib
import importlib
import inspect
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from types import ModuleType
from typing import Any

KNOWN = ("ingest", "trafilatura", "trafilatura-fast", "resiliparse", "readability")
ENTRY_POINTS = ("app.content.extract", "app.fetch.extract")
"""Where a checkout's `extract(body, content_type)` lives: now, and before app/content."""

# Block elements of readability's summary that end a line, so that their texts do not run
# into one another (a snippet is then found across a boundary only where it spans one).
_BLOCKS = frozenset(
    "address article aside blockquote br dd div dl dt figcaption figure footer h1 h2 h3 h4 h5"
    " h6 header hr li main nav ol p pre section table td th tr ul".split()
)


@dataclass
class Candidate:
    name: str
    extract: Callable[[bytes, str], str | None]
    modules: dict[str, ModuleType] = field(default_factory=dict)
    root: Path | None = None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """This checkout's `app` in sys.modules, and its root first on sys.path."""
        if self.root is None:
            yield
            return
        others = _take_app_modules()
        sys.modules.update(self.modules)
        sys.path.insert(0, str(self.root))
        try:
            yield
        finally:
            sys.path.remove(str(self.root))
            self.modules = _take_app_modules()
            sys.modules.update(others)


def _take_app_modules() -> dict[str, ModuleType]:
    """Remove `app` and its submodules from sys.modules and return them."""
    names = [n for n in sys.modules if n == "app" or n.startswith("app.")]
    return {name: sys.modules.pop(name) for name in names}


def load(name: str, app_root: Path) -> Candidate:
    """The candidate called `name` (see KNOWN, or ingest@PATH)."""
    if name == "ingest" or name.startswith("ingest@"):
        root = Path(name.removeprefix("ingest@")).resolve() if "@" in name else app_root
        return _ingest(name, root)
    if name.startswith("trafilatura"):
        return _trafilatura(name, fast=name == "trafilatura-fast")
    return {"resiliparse": _resiliparse, "readability": _readability}[name]()


def _ingest(name: str, root: Path) -> Candidate:
    candidate = Candidate(f"{name} {_describe(root)}", _no_extract, root=root)
    with candidate.active():
        module = _entry_point(root)
    extract = module.extract
    takes_url = "url" in inspect.signature(extract).parameters

    def run(body: bytes, url: str) -> str | None:
        extracted = extract(body, "text/html", url=url) if takes_url else extract(body, "text/html")
        text: str | None = extracted.text
        return text

    candidate.extract = run
    return candidate


def _no_extract(body: bytes, url: str) -> str | None:
    raise RuntimeError("not loaded yet")


def _entry_point(root: Path) -> Any:
    for module_name in ENTRY_POINTS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue  # this checkout has no such module; a missing dependency is raised
            raise
        if not Path(module.__file__ or "").resolve().is_relative_to(root):
            raise ImportError(f"{module_name} came from {module.__file__}, not {root}")
        return module
    raise ImportError(f"no {' or '.join(ENTRY_POINTS)} under {root}", name="app")


def _describe(root: Path) -> str:
    """The checkout's commit, as `git describe` gives it (with -dirty when edited)."""
    described = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
        check=False,
    )
    return described.stdout.strip() or "?"


def _trafilatura(name: str, fast: bool) -> Candidate:
    import trafilatura

    def run(body: bytes, url: str) -> str | None:
        text: str | None = trafilatura.extract(body, fast=fast)
        return text

    return Candidate(f"{name} {version('trafilatura')}", run)


def _resiliparse() -> Candidate:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    def run(body: bytes, url: str) -> str | None:
        text: str = extract_plain_text(bytes_to_str(body, detect_encoding(body)), main_content=True)
        return text

    return Candidate(f"resiliparse {version('resiliparse')}", run)


def _readability() -> Candidate:
    import lxml.html
    from readability import Document

    def run(body: bytes, url: str) -> str | None:
        tree = lxml.html.fromstring(Document(body).summary())
        for element in tree.iter():
            if isinstance(element.tag, str) and element.tag in _BLOCKS:
                element.tail = "\n" + (element.tail or "")
        text: str = tree.text_content()
        return text

    return Candidate(f"readability {version('readability-lxml')}", run)
