"""Extraction benchmark: how much of a page's main text each extractor finds, how much
boilerplate it lets in, and what it costs per page, on trafilatura's evaluation set.

    python -m bench.extraction --candidates ingest,trafilatura
    python -m bench.extraction --candidates ingest,ingest@../base,trafilatura --worst 10

Data (`--data`): 990 archived pages, each with snippets its main text must contain (`with`)
and must not (`without`); see ../shared/extraction-eval/README.md. Read where it lies
(`bench.eval_pages`: BENCH_EXTRACTION_DATA, else `../shared/extraction-eval/trafilatura-eval`
beside the repository); never copied. `--pages N` takes a fixed sample of N (`--seed`).

Scoring, as trafilatura's evaluation does it: per snippet, a `with` found is a true positive
and missing a false negative, a `without` found a false positive and absent a true negative;
precision, recall, F1 and accuracy over all snippets of all pages. "Found" is a substring
test, case-sensitive, after every run of whitespace in both the snippet and the text becomes
one space and both are stripped (`--match normalised`, as trafilatura's tests/eval_common.py
`count_item` compares now). `--match exact` compares them raw, as its older
tests/comparison.py did: the eval data's README table was made so (it moves F1 by 0.002).
A candidate that raises on a page finds nothing there (and the error is counted). Per page:
the share missing at least one `with` snippet, the share whose own F1 is under 0.5, and the
pages whose text is empty.

Candidates (`--candidates`, comma-separated):
- `ingest`: this checkout's extractor, or `--app-root`'s: `app.content.extract.extract(body,
  "text/html")` (its `.text`), or `app.fetch.extract.extract` before it moved; the page's
  URL is passed when the function takes `url`.
- `ingest@PATH`: the same from another checkout (`git worktree add ../base b5618f9`), so
  one run shows before and after. Each checkout's `app` modules are imported apart and put
  in `sys.modules` only around its own calls.
- `trafilatura` (`extract(body)`, its defaults), `trafilatura-fast` (`fast=True`).
- `resiliparse` (`extract_plain_text(main_content=True)`, its own charset detection) and
  `readability` (readability-lxml's `Document(body).summary()`, then that HTML's text, a
  line per block): not project dependencies, run when importable, else "not installed".
  To measure them, a scratch environment with the locked dependencies and those two:
      VENV=../extract-venv  # anywhere outside the checkout
      .uv/bin/uv venv $VENV
      .uv/bin/uv export --frozen --no-hashes --no-emit-project > $VENV/req.txt
      VIRTUAL_ENV=$VENV .uv/bin/uv pip install -r $VENV/req.txt resiliparse readability-lxml
      $VENV/bin/python -m bench.extraction --candidates ingest,resiliparse,...

Timing: wall time of the extraction call alone, bytes in memory (decoding included: every
candidate is given the page's bytes), median and p90 per page. One process; candidates take
turns page by page in a rotating order (page 1: A B C, page 2: B C A, ...), so a busy
moment of the machine falls on all of them alike. `--worst N` lists the pages where the
first ingest candidate loses most to `--versus` (default trafilatura), to help tuning;
`--json PATH` keeps every page's counts and time.
"""

import argparse
import contextlib
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.eval_pages import REPO, Page, default_data, load_pages
from bench.extractors import KNOWN, Candidate, load
from bench.numbers import fmt, median, percentile, table

WARM_UP = b"<html><head><title>warm</title></head><body><p>Warm up, once.</p></body></html>"


def _normalised(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Outcome:
    """One candidate on one page: its snippet counts, time and what went wrong."""

    file: str
    tp: int
    fp: int
    fn: int
    tn: int
    ms: float
    empty: bool
    missing: tuple[str, ...]
    unwanted: tuple[str, ...]
    error: str | None = None

    @property
    def f1(self) -> float:
        denominator = 2 * self.tp + self.fp + self.fn
        return 2 * self.tp / denominator if denominator else 0.0


def score(page: Page, text: str | None, ms: float, match: str, error: str | None) -> Outcome:
    """Count the page's snippets found in `text` (None: nothing extracted)."""
    compare = _normalised if match == "normalised" else str
    haystack = compare(text or "")
    missing = tuple(s for s in page.must if compare(s) not in haystack)
    unwanted = tuple(s for s in page.must_not if compare(s) in haystack)
    return Outcome(
        file=page.file,
        tp=len(page.must) - len(missing),
        fp=len(unwanted),
        fn=len(missing),
        tn=len(page.must_not) - len(unwanted),
        ms=ms,
        empty=not (text or "").strip(),
        missing=missing,
        unwanted=unwanted,
        error=error,
    )


Results = dict[str, list[Outcome]]
"""Each candidate's outcomes, by its name, in the order of the pages."""


def run(pages: Sequence[Page], candidates: Sequence[Candidate], match: str) -> Results:
    """Every candidate on every page, taking turns in a rotating order."""
    for candidate in candidates:
        # Imports and caches made on a first call are not a page's cost; a candidate that
        # fails here shows it on the pages.
        with candidate.active(), contextlib.suppress(Exception):
            candidate.extract(WARM_UP, "http://example.com/")
    results: Results = {c.name: [] for c in candidates}
    for i, page in enumerate(pages):
        turn = i % len(candidates)
        for candidate in [*candidates[turn:], *candidates[:turn]]:
            error = text = None
            with candidate.active():
                started = time.perf_counter()
                try:
                    text = candidate.extract(page.body, page.url)
                except Exception as exc:  # a crash on a page is scored, as a miss
                    error = f"{type(exc).__name__}: {exc}"
                ms = (time.perf_counter() - started) * 1000
            results[candidate.name].append(score(page, text, ms, match, error))
        if (i + 1) % 100 == 0:
            print(f"{i + 1}/{len(pages)} pages", file=sys.stderr, flush=True)
    return results


def summary(outcomes: Sequence[Outcome]) -> dict[str, float]:
    tp, fp, fn, tn = (sum(getattr(o, k) for o in outcomes) for k in ("tp", "fp", "fn", "tn"))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    pages = len(outcomes)
    return {
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "accuracy": (tp + tn) / (tp + fp + fn + tn),
        "missing_share": sum(1 for o in outcomes if o.fn) / pages,
        "low_f1_share": sum(1 for o in outcomes if o.f1 < 0.5) / pages,
        "empty": sum(1 for o in outcomes if o.empty),
        "errors": sum(1 for o in outcomes if o.error),
        "ms_median": median([o.ms for o in outcomes]),
        "ms_p90": percentile([o.ms for o in outcomes], 0.9),
    }


HEADERS = (
    "extractor",
    "precision",
    "recall",
    "F1",
    "accuracy",
    "pages missing a must-have",
    "pages F1<0.5",
    "empty",
    "ms median",
    "ms p90",
)


def report(summaries: dict[str, dict[str, float]], missing: dict[str, str]) -> str:
    rows = [
        [
            name,
            *(fmt(s[k], 3) for k in ("precision", "recall", "f1", "accuracy")),
            f"{s['missing_share']:.1%}",
            f"{s['low_f1_share']:.1%}",
            str(int(s["empty"])),
            fmt(s["ms_median"]),
            fmt(s["ms_p90"]),
        ]
        for name, s in summaries.items()
    ]
    rows += [[name, why, *["-"] * (len(HEADERS) - 2)] for name, why in missing.items()]
    lines = [table(HEADERS, rows)]
    lines += [
        f"{n} raised on {int(s['errors'])} of the pages"
        for n, s in summaries.items()
        if s["errors"]
    ]
    return "\n".join(lines)


def worst(ours: Sequence[Outcome], theirs: Sequence[Outcome], count: int) -> list[str]:
    """The pages where `ours` trails `theirs` most: page F1, then snippets found."""
    pairs = sorted(
        zip(ours, theirs, strict=True),
        key=lambda pair: (pair[1].f1 - pair[0].f1, pair[1].tp - pair[0].tp),
        reverse=True,
    )
    lines = []
    for mine, other in pairs[:count]:
        if other.f1 <= mine.f1:
            break
        lines.append(f"- {mine.file}: F1 {mine.f1:.2f} vs {other.f1:.2f}")
        lines += [f"    missing: {s!r}" for s in mine.missing]
        lines += [f"    unwanted: {s!r}" for s in mine.unwanted]
        lines += [f"    error: {mine.error}"] if mine.error else []
    return lines


def candidate_names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if unknown := [n for n in names if n not in KNOWN and not n.startswith("ingest@")]:
        raise argparse.ArgumentTypeError(f"unknown candidate {', '.join(unknown)}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add(
        "--candidates",
        type=candidate_names,
        default=["ingest", "trafilatura"],
        help=f"comma-separated: {', '.join(KNOWN)}, ingest@PATH (default ingest,trafilatura)",
    )
    add("--data", type=Path, default=default_data(), help="the eval set's directory")
    add("--app-root", type=Path, default=REPO, help="the checkout `ingest` means (default: this)")
    add("--pages", type=int, default=None, help="a fixed sample of this many pages (default all)")
    add("--seed", type=int, default=23, help="of the --pages sample")
    add("--match", choices=("normalised", "exact"), default="normalised")
    add("--worst", type=int, default=0, help="list the N pages where ingest trails --versus most")
    add("--versus", default="trafilatura", help="the candidate --worst compares with")
    add("--json", type=Path, default=None, help="write every page's outcome here")
    args = parser.parse_args()

    candidates, missing = [], {}
    for name in args.candidates:
        try:
            candidates.append(load(name, args.app_root.resolve()))
        except ImportError:
            missing[name] = "not installed"
    pages = load_pages(args.data, args.pages, args.seed)
    command = shlex.join(["python", "-m", "bench.extraction", *sys.argv[1:]])
    results = run(pages, candidates, args.match) if candidates else {}
    summaries = {name: summary(outcomes) for name, outcomes in results.items()}
    python = sys.version.split()[0]
    print(f"\n{len(pages)} pages of {args.data}, --match {args.match}; python {python}")
    print(f"\n{report(summaries, missing)}\n\n    {command}", flush=True)
    if args.worst:
        print_worst(candidates, results, args.versus, args.worst)
    if args.json:
        dump: dict[str, Any] = {"command": command, "summaries": summaries, "missing": missing}
        dump["pages"] = {n: [asdict(o) for o in outcomes] for n, outcomes in results.items()}
        args.json.write_text(json.dumps(dump, indent=1, ensure_ascii=False))


def print_worst(candidates: Sequence[Candidate], results: Results, versus: str, count: int) -> None:
    ingest = next((c.name for c in candidates if c.name.startswith("ingest")), None)
    theirs = next((c.name for c in candidates if c.name.split(" ")[0] == versus), None)
    if ingest is None or theirs is None:
        print(f"\n--worst wants an ingest candidate and {versus} among the candidates")
        return
    print(f"\nWhere {ingest} trails {theirs} most:")
    print("\n".join(worst(results[ingest], results[theirs], count)) or "nowhere")


if __name__ == "__main__":
    main()
