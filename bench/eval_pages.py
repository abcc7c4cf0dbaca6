"""The extraction eval set's pages: where the set lies and how its pages are read.

Owns reading trafilatura's evaluation set (990 archived pages, each with snippets its main
text must and must not contain), for `bench.extraction` (scoring), `bench.target` (serving
them) and `bench.pages` (draining them). Never copies or changes the set.

Where it lies: BENCH_EXTRACTION_DATA, else `../shared/extraction-eval/trafilatura-eval`
beside the repository (as CI has it), else beside the project's working copy, /work (a
fresh clone elsewhere, as `.ci/run` is tried before landing); see that set's README.md.
"""

import gzip
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = Path("shared/extraction-eval/trafilatura-eval")


def default_data() -> Path:
    """BENCH_EXTRACTION_DATA, else the eval set beside the repository, else under /work."""
    given = os.environ.get("BENCH_EXTRACTION_DATA")
    if given:
        return Path(given)
    for root in (REPO.parent, Path("/work")):
        if (root / DATA / "expected.json").is_file():
            return root / DATA
    return REPO.parent / DATA


@dataclass(frozen=True)
class Page:
    url: str
    file: str
    body: bytes
    must: tuple[str, ...]
    must_not: tuple[str, ...]


def load_pages(data: Path, count: int | None = None, seed: int = 23) -> list[Page]:
    """The eval pages, decompressed; a fixed sample of `count` of them when given."""
    expected = json.loads((data / "expected.json").read_text(encoding="utf-8"))
    items = sorted(expected.items(), key=lambda item: item[1]["file"])
    if count is not None and count < len(items):
        items = random.Random(seed).sample(items, count)
    return [
        Page(
            url,
            entry["file"],
            gzip.decompress((data / "pages" / entry["file"]).read_bytes()),
            tuple(entry["with"]),
            tuple(entry["without"]),
        )
        for url, entry in items
    ]
