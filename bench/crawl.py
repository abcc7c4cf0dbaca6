"""Crawl benchmark: how fast `ingest serve` crawls a site, against a drain of the same
pages' URLs, and how fast it maps the site.

    python -m bench.crawl --backend both --pages 10000 --rounds 1

The site is `bench.site` (N pages with sections, a feed, sitemaps named by robots.txt, a
disallowed /private/ and an endless calendar), a fresh one for each run, in its own
process. For each backend, in rounds, the scenarios one after the other (in reverse order
every other round, so the machine's drift hits each alike), each on a fresh database and
a fresh `ingest serve` (its worker in a thread, extraction in its processes as shipped):

- drain: the N /page/i URLs POSTed to /jobs/batch, BATCH a request; seconds from the first
  POST until GET /stats counts N succeeded (polled every POLL_SECONDS).
- crawl: POST /crawls from the home page with `--max-depth` and `--limit` (N + 1,000);
  seconds from the POST until GET /crawls/{id} says completed (polled alike); pages/s are
  its succeeded pages over that. Then checked: every /page/i fetched once and no /private/
  page (the site's counts), the calendar within reach of max_depth, no URL made two jobs
  of (GET /crawls/{id}/pages).
- map: POST /crawls in map mode; seconds until completed, and the URLs it lists
  (GET /crawls/{id}/urls): the sitemaps' N, the home page, and nothing else.

Serve CPU is its process's and its extraction processes' over the timed span. Prints a
table per backend (medians over rounds; crawl / drain is each round's crawl over that
round's drain) and the crawl's and map's checks; any problem the checks or serve's log
show is printed, not raised. Raw numbers go to bench/results/crawl-*.json.
"""

import argparse
import asyncio
import json
import time
from collections import Counter
from typing import Any

from bench.drain import add_settings_option
from bench.footprint import status_kb
from bench.harness import (
    RESULTS,
    backends,
    drop_database,
    environment,
    fresh_database,
    tree_cpu_seconds,
)
from bench.numbers import fmt, median, table
from bench.serve import LOG, Serve, serving
from bench.site import RunningSite, start_site

DATABASE = "ingest_bench_crawl"
SCENARIOS = ("drain", "crawl", "map")
BATCH = 1000
POLL_SECONDS = 0.1
LIMIT_BEYOND_PAGES = 1000
"""A crawl's default limit is the site's pages and this many more: room for the home page,
the sections, the calendar and some of the /private/ pages (dead, robots)."""
LOG_PROBLEMS_KEPT = 20


async def _json(serve: Serve, method: str, path: str, body: Any = None) -> Any:
    response = await serve.client.request(method, path, json=body)
    if response.status_code not in (200, 201):
        raise RuntimeError(f"{method} {path}: {response.status_code} {response.text[:300]}")
    return response.json()


async def _site_counts(serve: Serve, site: RunningSite) -> dict[str, Any]:
    response = await serve.client.get(f"{site.base_url}/__counts")
    response.raise_for_status()
    counts: dict[str, Any] = response.json()
    return counts


async def drain(serve: Serve, site: RunningSite, args: argparse.Namespace) -> dict[str, Any]:
    """The site's pages as jobs, BATCH a POST, until all have succeeded."""
    urls = [f"{site.base_url}/page/{i}" for i in range(site.pages)]
    started = time.monotonic()
    for first in range(0, len(urls), BATCH):
        jobs = [{"url": url} for url in urls[first : first + BATCH]]
        await _json(serve, "POST", "/jobs/batch", {"jobs": jobs})
    while True:
        serve.check_alive()
        counts = (await _json(serve, "GET", "/stats"))["counts"]
        if counts["dead"] or counts["cancelled"]:
            raise RuntimeError(f"drain: jobs dead or cancelled: {counts}")
        if counts["succeeded"] >= len(urls):
            break
        if time.monotonic() - started > args.timeout:
            raise RuntimeError(f"drain not done after {args.timeout:g}s: {counts}")
        await asyncio.sleep(POLL_SECONDS)
    return {"seconds": time.monotonic() - started, "pages": counts["succeeded"]}


TIMELINE = ("waiting", "pending", "running", "succeeded", "dead")
"""The counts a crawl's timeline keeps, every COUNTS_SECONDS, with the time and how long the
GET took, and serve's RSS (MB, its own process: the extraction processes are apart)."""
COUNTS_SECONDS = 2.0
"""How often the crawl's counts are read: GET /crawls/{id} counts its frontier and pages, a
read that grows with the crawl (its status alone is polled every POLL_SECONDS, as the
drain's GET /stats is)."""


async def _until_ended(
    serve: Serve, crawl_id: str, started: float, timeout: float
) -> tuple[Any, list[list[float]]]:
    """The crawl once ended, and its timeline: [seconds, GET ms, *TIMELINE counts] every
    COUNTS_SECONDS; its status polled every POLL_SECONDS (GET /crawls, without counts)."""
    timeline = []
    counted = 0.0
    while True:
        serve.check_alive()
        now = time.monotonic()
        if now - counted >= COUNTS_SECONDS:
            counted = now
            crawl = await _json(serve, "GET", f"/crawls/{crawl_id}")
            answered = time.monotonic()
            counts = crawl["counts"]
            rss_mb = status_kb(serve.process.pid).get("VmRSS", 0) / 1024
            timeline.append(
                [
                    answered - started,
                    (answered - now) * 1000,
                    *(counts[k] for k in TIMELINE),
                    rss_mb,
                ]
            )
        listed = await _json(serve, "GET", "/crawls?limit=1")
        status = next(c["status"] for c in listed["items"] if c["id"] == crawl_id)
        if status != "running":
            return await _json(serve, "GET", f"/crawls/{crawl_id}"), timeline
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"crawl {crawl_id} still running after {timeout:g}s")
        await asyncio.sleep(POLL_SECONDS)


async def _listed(serve: Serve, path: str, limit: int) -> list[dict[str, Any]]:
    """Every item of a paged list of the API."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        response = await serve.client.get(path, params=params)
        response.raise_for_status()
        page = response.json()
        items += page["items"]
        if not (cursor := page["next_cursor"]):
            return items


def crawl_problems(site_counts: dict[str, Any], pages: int, max_depth: int) -> list[str]:
    """What a crawl of the site to `max_depth` should not have done, as the site counted it:
    a page missed or fetched twice, a /private/ page fetched, more calendar days than a
    crawl reaches from /calendar/2026-01-01 (linked from pages at depth 0, so at depth 1 at
    least: max_depth - 1 days either way)."""
    requests = site_counts["requests"]
    problems = []
    if site_counts["pages_fetched"] != pages:
        problems.append(f"{site_counts['pages_fetched']} of {pages} pages fetched")
    if site_counts["pages_repeated"]:
        problems.append(f"{site_counts['pages_repeated']} pages fetched more than once")
    if requests.get("private", 0):
        problems.append(f"{requests['private']} /private/ pages fetched (robots.txt)")
    if requests.get("home", 0) != 1:
        problems.append(f"the home page fetched {requests.get('home', 0)} times")
    reach = 2 * max_depth - 1
    if requests.get("calendar", 0) > reach:
        problems.append(f"{requests['calendar']} calendar requests, more than {reach}")
    return problems


async def crawl(serve: Serve, site: RunningSite, args: argparse.Namespace) -> dict[str, Any]:
    """A crawl of the site from its home page, until completed, then checked."""
    body = {
        "url": f"{site.base_url}/",
        "max_depth": args.max_depth,
        "limit": args.limit,
    }
    started = time.monotonic()
    created = await _json(serve, "POST", "/crawls", body)
    ended, timeline = await _until_ended(serve, created["id"], started, args.timeout)
    seconds = time.monotonic() - started
    counts = ended["counts"]
    site_counts = await _site_counts(serve, site)
    problems = crawl_problems(site_counts, site.pages, args.max_depth)
    if ended["status"] != "completed":
        problems.append(f"the crawl ended {ended['status']}")
    jobs = await _listed(serve, f"/crawls/{created['id']}/pages", 500)
    twice = sum(n - 1 for n in Counter(job["url"] for job in jobs).values() if n > 1)
    if twice:
        problems.append(f"{twice} jobs of a URL that already had one")
    return {
        "seconds": seconds,
        "pages": counts["succeeded"],
        "counts": counts,
        "jobs": len(jobs),
        "jobs_by_status": dict(Counter(job["status"] for job in jobs)),
        "site": site_counts,
        "problems": problems,
        "timeline": timeline,
        # Serve's RSS a quarter into the crawl (past its start-up), and at its end.
        "rss_mb": [timeline[len(timeline) // 4][-1], timeline[-1][-1]] if timeline else [],
    }


async def site_map(serve: Serve, site: RunningSite, args: argparse.Namespace) -> dict[str, Any]:
    """A map of the site, until completed; the URLs it lists, checked against the site's."""
    started = time.monotonic()
    created = await _json(serve, "POST", "/crawls", {"url": f"{site.base_url}/", "mode": "map"})
    ended, _ = await _until_ended(serve, created["id"], started, args.timeout)
    seconds = time.monotonic() - started
    urls = await _listed(serve, f"/crawls/{created['id']}/urls", 10_000)
    listed = {found["url"] for found in urls}
    expected = {f"{site.base_url}/page/{i}" for i in range(site.pages)} | {f"{site.base_url}/"}
    problems = []
    if ended["status"] != "completed":
        problems.append(f"the map ended {ended['status']}")
    if missing := expected - listed:
        problems.append(f"{len(missing)} of the site's URLs not listed, e.g. {min(missing)}")
    if extra := listed - expected:
        problems.append(f"{len(extra)} URLs listed beyond the site's, e.g. {min(extra)}")
    if len(urls) != len(listed):
        problems.append(f"{len(urls) - len(listed)} URLs listed twice")
    site_counts = await _site_counts(serve, site)
    if fetched := sum(site_counts["requests"].get(k, 0) for k in ("home", "page", "section")):
        problems.append(f"{fetched} pages fetched by a map")
    return {
        "seconds": seconds,
        "pages": len(urls),
        "counts": ended["counts"],
        "sources": dict(Counter(found["source"] for found in urls)),
        "site": site_counts,
        "problems": problems,
    }


RUNS = {"drain": drain, "crawl": crawl, "map": site_map}


def log_problems() -> list[str]:
    """The serve log's errors and tracebacks, the first few."""
    lines = LOG.read_text().splitlines() if LOG.exists() else []
    found = [line for line in lines if "ERROR" in line or "Traceback" in line]
    return found[:LOG_PROBLEMS_KEPT]


async def one_run(backend: str, scenario: str, args: argparse.Namespace) -> dict[str, Any]:
    """`scenario` on a fresh database, a fresh `ingest serve` and a fresh site."""
    url = await fresh_database(backend, DATABASE)
    site = start_site(args.pages)
    try:
        async with serving(url, args) as serve:
            before = tree_cpu_seconds(serve.process.pid)
            result = await RUNS[scenario](serve, site, args)
            result["serve_cpu_seconds"] = tree_cpu_seconds(serve.process.pid) - before
    finally:
        site.stop()
    result["log_problems"] = log_problems()
    result["pages_per_s"] = result["pages"] / result["seconds"]
    return result


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    results = []
    for round_ in range(args.rounds):
        for backend in backends(args.backend):
            order = SCENARIOS if round_ % 2 == 0 else SCENARIOS[::-1]
            for scenario in order:
                result = await one_run(backend, scenario, args)
                results.append({"backend": backend, "round": round_, "scenario": scenario} | result)
                shown = {k: result[k] for k in ("pages", "seconds", "pages_per_s")}
                print(f"round {round_ + 1} {backend} {scenario}: {shown}", flush=True)
                for problem in result.get("problems", []) + result["log_problems"]:
                    print(f"  {scenario}: {problem}", flush=True)
    for backend in backends(args.backend):
        await drop_database(backend, DATABASE)
    return results


def summary(results: list[dict[str, Any]], backend: str) -> str:
    """The backend's table: each scenario's medians over rounds."""
    mine = [r for r in results if r["backend"] == backend]
    drains = {r["round"]: r["pages_per_s"] for r in mine if r["scenario"] == "drain"}
    rows = []
    for scenario in SCENARIOS:
        runs = [r for r in mine if r["scenario"] == scenario]
        ratios = [r["pages_per_s"] / drains[r["round"]] for r in runs if r["round"] in drains]
        cpu = median([r["serve_cpu_seconds"] for r in runs])
        pages = median([r["pages"] for r in runs])
        rows.append(
            [
                scenario,
                fmt(pages, 0),
                fmt(median([r["seconds"] for r in runs]), 2),
                fmt(median([r["pages_per_s"] for r in runs]), 0),
                fmt(median(ratios), 2) if scenario == "crawl" else "-",
                fmt(cpu, 1),
                fmt(cpu * 1000 / pages, 2) if pages else "-",
            ]
        )
    headers = [
        "scenario",
        "pages (map: URLs)",
        "seconds",
        "pages/s",
        "crawl / drain",
        "serve CPU s",
        "CPU ms a page",
    ]
    return f"{backend}:\n\n{table(headers, rows)}"


def checks(results: list[dict[str, Any]]) -> str:
    """Each crawl's and map's counts and the site's, one row a run."""
    rows = []
    for r in results:
        if r["scenario"] == "drain":
            continue
        counts, requests = r["counts"], r["site"]["requests"]
        left_out = ", ".join(f"{k} {v}" for k, v in sorted(counts["left_out"].items()))
        rows.append(
            [
                f"{r['backend']} {r['scenario']} {r['round'] + 1}",
                str(counts["found"]),
                str(counts["queued"]),
                str(counts["succeeded"]),
                str(counts["dead"]),
                str(counts["cut"]),
                left_out or "-",
                f"{r['site']['pages_fetched']} ({r['site']['pages_repeated']} twice)",
                " ".join(f"{k} {requests.get(k, 0)}" for k in ("section", "calendar", "private")),
                str(requests.get("listing", 0)),
                " -> ".join(f"{mb:.0f}" for mb in r.get("rss_mb", [])) or "-",
                "; ".join(r["problems"] + r["log_problems"]) or "none",
            ]
        )
    headers = [
        "run",
        "found",
        "queued",
        "succeeded",
        "dead",
        "cut",
        "left out",
        "pages fetched",
        "other fetches",
        "listings",
        "serve RSS MB",
        "problems",
    ]
    return table(headers, rows)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add = parser.add_argument
    add("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    add("--pages", type=int, default=10_000, help="the site's pages (default 10000)")
    add("--rounds", type=int, default=1)
    add("--max-depth", type=int, default=3, help="the crawl's max_depth (default 3)")
    add("--limit", type=int, default=None, help="the crawl's limit (default: pages + 1000)")
    add("--concurrency", type=int, default=32, help="INGEST_WORKER_CONCURRENCY (default 32)")
    add(
        "--poll-ms",
        type=float,
        default=2000.0,
        help="INGEST_POLL_INTERVAL_SECONDS, in ms (default 2000, as shipped: submits wake it)",
    )
    add("--timeout", type=float, default=900.0, help="per run, seconds (default 900)")
    add_settings_option(parser, "ingest serve")
    args = parser.parse_args()
    args.limit = args.limit or args.pages + LIMIT_BEYOND_PAGES
    # Before --set's, which win.
    args.set = [f"INGEST_CRAWL_MAX_PAGES={args.limit}", *args.set]

    began = time.monotonic()
    env = asyncio.run(environment())
    print(", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    results = asyncio.run(run(args))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"crawl-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"environment": env, "args": vars(args), "results": results}, indent=1)
    )
    for backend in backends(args.backend):
        print(f"\n{summary(results, backend)}")
    print(f"\n{checks(results)}\n")
    print(f"{len(results)} runs in {time.monotonic() - began:.0f}s; raw numbers in {out}")


if __name__ == "__main__":
    main()
