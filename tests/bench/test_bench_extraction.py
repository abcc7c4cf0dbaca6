"""bench.extraction: how a page's snippets are scored, in what order candidates take turns,
and that two checkouts' extractors run side by side in one process."""

import sys
from pathlib import Path

import pytest

from bench.eval_pages import Page
from bench.extraction import run, score, summary, worst
from bench.extractors import Candidate, load

PAGE = Page(
    url="http://example.com/a",
    file="a.html.gz",
    body=b"<p>x</p>",
    must=("first  sentence\nof it", "Last one."),
    must_not=("Imprint", "Share"),
)


@pytest.mark.parametrize(
    ("match", "text", "counts"),
    [
        ("normalised", "first sentence of it\nLast one. Share", (2, 1, 0, 1)),
        ("exact", "first sentence of it\nLast one. Share", (1, 1, 1, 1)),
        ("normalised", "FIRST SENTENCE OF IT", (0, 0, 2, 2)),
        ("normalised", None, (0, 0, 2, 2)),
    ],
)
def test_snippets_found_after_whitespace_is_collapsed(match, text, counts) -> None:
    """Normalised matching collapses whitespace on both sides, exact does not; case counts."""
    outcome = score(PAGE, text, 1.0, match, None)
    assert counts == (outcome.tp, outcome.fp, outcome.fn, outcome.tn)


def test_summary_over_all_snippets_and_per_page() -> None:
    """Precision and recall pool the snippets; the page shares count pages."""
    good = score(PAGE, "first sentence of it Last one.", 2.0, "normalised", None)
    bad = score(PAGE, "", 4.0, "normalised", "ValueError: no")
    result = summary([good, bad])
    expected = {"precision": 1.0, "recall": 0.5, "missing_share": 0.5, "low_f1_share": 0.5}
    assert expected == {k: result[k] for k in expected}
    assert (1, 1, 3.0) == (result["empty"], result["errors"], result["ms_median"])


def test_candidates_take_turns_in_rotating_order_and_a_crash_is_a_miss() -> None:
    """Page 1: A, B; page 2: B, A; a candidate that raises finds nothing on that page."""
    calls: list[str] = []

    def named(name: str, text: str | None) -> Candidate:
        def extract(body: bytes, url: str) -> str | None:
            calls.append(name)
            if text is None:
                raise ValueError("broken")
            return text

        return Candidate(name, extract)

    candidates = [named("A", "Last one."), named("B", None)]
    results = run([PAGE, PAGE], candidates, "normalised")
    assert ["A", "B", "A", "B", "B", "A"] == calls  # warm-up, then the rotation
    assert [1, 1] == [o.tp for o in results["A"]]
    assert ["ValueError: broken"] * 2 == [o.error for o in results["B"]]


def test_worst_lists_where_ours_trails_with_the_snippets_it_got_wrong() -> None:
    """Pages ordered by how far ours trails; pages where it does not trail are left out."""
    ours = score(PAGE, "Last one. Share", 1.0, "normalised", None)
    theirs = score(PAGE, "first sentence of it Last one.", 1.0, "normalised", None)
    expected = [
        "- a.html.gz: F1 0.50 vs 1.00",
        "    missing: 'first  sentence\\nof it'",
        "    unwanted: 'Share'",
    ]
    assert expected == worst([ours, theirs], [theirs, theirs], 5)


def _checkout(root: Path, package: str, says: str) -> Path:
    module = root / "app" / package / "extract.py"
    module.parent.mkdir(parents=True)
    (root / "app" / "__init__.py").write_text("")
    (module.parent / "__init__.py").write_text("")
    module.write_text(
        "from types import SimpleNamespace\n"
        "def extract(body, content_type):\n"
        "    import app.said\n"  # imported at call time: must find this checkout's module
        "    return SimpleNamespace(text=app.said.TEXT)\n"
    )
    (root / "app" / "said.py").write_text(f"TEXT = {says!r}\n")
    return root


def test_two_checkouts_run_side_by_side(tmp_path: Path) -> None:
    """ingest@PATH imports each checkout's `app` apart, old (app.fetch) and new layout."""
    new = _checkout(tmp_path / "new", "content", "new")
    old = _checkout(tmp_path / "old", "fetch", "old")
    before = {n: m for n, m in sys.modules.items() if n == "app" or n.startswith("app.")}
    candidates = [load("ingest", new), load(f"ingest@{old}", new)]
    texts = []
    for candidate in [*candidates, *candidates]:
        with candidate.active():
            texts.append(candidate.extract(b"", "http://example.com/"))
    after = {n: m for n, m in sys.modules.items() if n == "app" or n.startswith("app.")}
    assert ["new", "old", "new", "old"] == texts
    assert before == after
