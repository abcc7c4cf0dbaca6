"""The Markdown tables `bench.drain` prints: medians over the rounds of each figure.

Every run is one dict of figures (`kind`, `name`, `processes`, `round` say which); each
table cell is the median of one figure over the rounds. "not ours" is the CPU the rest of
the machine used meanwhile, in cores: the load the figures were taken under.
"""

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from bench.baselines import ARQ_NAME
from bench.harness import backends
from bench.numbers import fmt, median, table

NAMES = {"sqlite": "ingest, SQLite", "postgresql": "ingest, PostgreSQL"}
BARE_NAMES = {
    "sqlite": "bare claim-one loop, SQLite",
    "postgresql": "bare claim-one loop, PostgreSQL",
}
NO_QUEUE_NAMES = {"httpx": "httpx alone, no queue", "fetcher": "Fetcher alone, no queue"}

Median = Callable[[str, str, int, str], float]
"""med(kind, name, processes, key): the median of one figure over the rounds."""


def summarize(results: list[dict], args: Any) -> str:
    groups: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list)
    )
    for r in results:
        for key, value in r.items():
            if isinstance(value, float | int) and key not in ("processes", "round"):
                groups[r["kind"], r["name"], r["processes"]][key].append(value)

    def med(kind: str, name: str, processes: int, key: str) -> float:
        return median(groups.get((kind, name, processes), {}).get(key, []))

    kinds = {kind for kind, _, _ in groups}
    sections = [
        headline_table(med, args),
        "Where the CPU goes (medians):\n\n" + cpu_table(med, groups, args),
    ]
    if len(args.processes) > 1:
        sections.append(processes_table(med, args))
    if "latency" in kinds or "serve" in kinds:
        sections.append(pickup_table(med, args))
    if "hosts" in kinds:
        sections.append(hosts_table(med, args))
    if "slow" in kinds:
        sections.append(slow_table(med, args))
    if "submit" in kinds:
        sections.append(submit_table(med, args))
    if "fair" in kinds:
        sections.append(fair_table(med, args))
    if "rss" in kinds:
        sections.append(rss_table(med, args))
    if "startup" in kinds:
        sections.append(startup_table(med, args))
    sections.append(time_table(results))
    return "\n\n".join(sections)


def cpu_table(med: Median, groups: dict, args: Any) -> str:
    columns = {
        "jobs_per_s": ("jobs/s", 0),
        "worker_cpu_ms": ("worker CPU ms/job", 2),
        "db_server_cpu_ms": ("server CPU ms/job (PostgreSQL; Redis for arq)", 2),
        "target_cpu_ms": ("target CPU ms/job", 2),
        "bench_cpu_ms": ("bench probe CPU ms/job", 2),
        "cores_busy": ("cores busy (of 2)", 2),
        "other_cores": ("of which not ours", 2),
        "connections_per_1k": ("connections opened per 1k jobs", 1),
    }
    suffix = {
        "hosts": f", {args.hosts:,} hosts",
        "slow": f", target {args.slow_delay_ms:g} ms",
    }
    order = ("drain", "hosts", "slow", "bare", "arq", "no-queue")
    rows = [
        [name + suffix.get(kind, ""), str(processes)]
        + [fmt(med(kind, name, processes, key), digits) for key, (_, digits) in columns.items()]
        for kind, name, processes in sorted(
            (g for g in groups if g[0] in order), key=lambda g: (order.index(g[0]), g)
        )
    ]
    return table(["system", "processes", *(title for title, _ in columns.values())], rows)


def domain_limit(args: Any, processes: int) -> str:
    """The workers' INGEST_DOMAIN_MAX_IN_FLIGHT (`bench.workers.ingest_env`)."""
    chosen = [s.split("=", 1)[1] for s in args.set if s.startswith("INGEST_DOMAIN_MAX_IN_FLIGHT=")]
    return chosen[-1] if chosen else "100000"


def headline_table(med: Median, args: Any) -> str:
    """Drain jobs/s, worker CPU and pickup per system; for ingest (and the bare loop), the
    ratio of each to the bare loop on the same backend and to httpx alone."""
    first = args.processes[0]
    labels = [label for label in ("bare", "httpx") if label in args.baseline]

    def reference(label: str, backend: str) -> tuple[str, str]:
        """The (kind, name) of the runs a `backend` row is compared with."""
        if label == "bare":
            return "bare", BARE_NAMES[backend]
        return "no-queue", NO_QUEUE_NAMES["httpx"]

    def ratios(kind: str, name: str, backend: str | None) -> list[str]:
        """Drain jobs/s for each process count, then worker CPU, over each reference."""
        if backend is None:
            return ["-"] * (2 * len(labels))
        drain, cpu = [], []
        for ref in (reference(label, backend) for label in labels):
            if ref == (kind, name):
                drain.append("-")
                cpu.append("-")
                continue
            speed = "jobs_per_s"
            over = [fmt(med(kind, name, p, speed) / med(*ref, p, speed), 2) for p in args.processes]
            drain.append(" / ".join(over))
            cost = "worker_cpu_ms"
            cpu.append(fmt(med(kind, name, first, cost) / med(*ref, first, cost), 2))
        return drain + cpu

    pickups = args.latency_seconds > 0  # a column only if measured

    def row(kind: str, name: str, backend: str | None, pickup: str) -> list[str]:
        return [
            name,
            *(fmt(med(kind, name, p, "jobs_per_s"), 0) for p in args.processes),
            fmt(med(kind, name, first, "worker_cpu_ms"), 2),
            *[pickup] * pickups,
            *ratios(kind, name, backend),
        ]

    headers = [
        "system",
        *(f"drain jobs/s, {p} process{'es' * (p > 1)}" for p in args.processes),
        f"worker CPU ms/job ({first} proc.)",
        *["pickup p50 / p99 ms"] * pickups,
        *(f"drain × {label}" for label in labels),
        *(f"CPU × {label} ({first} proc.)" for label in labels),
    ]
    rows = []
    chosen = backends(args.backend)
    for backend in chosen:
        name = NAMES[backend]
        pickup = (
            f"{fmt(med('latency', name, 1, 'p50_ms'))} / {fmt(med('latency', name, 1, 'p99_ms'))}"
        )
        rows.append(row("drain", name, backend, pickup))
    if len(chosen) == 2:
        a, b = (NAMES[backend] for backend in chosen)

        def ratio(kind: str, processes: int, key: str) -> str:
            return fmt(med(kind, b, processes, key) / med(kind, a, processes, key), 2)

        pickup = f"{ratio('latency', 1, 'p50_ms')} / {ratio('latency', 1, 'p99_ms')}"
        rows.append(
            [
                "ratio PostgreSQL / SQLite",
                *(ratio("drain", p, "jobs_per_s") for p in args.processes),
                ratio("drain", first, "worker_cpu_ms"),
                *[pickup] * pickups,
                *["-"] * (2 * len(labels)),
            ]
        )
    if "bare" in args.baseline:
        rows += [row("bare", BARE_NAMES[backend], backend, "-") for backend in chosen]
    if "arq" in args.baseline:
        rows.append(row("arq", ARQ_NAME, None, "-"))
    for mode in args.baseline:
        if mode in NO_QUEUE_NAMES:
            rows.append(row("no-queue", NO_QUEUE_NAMES[mode], None, "-"))
    return table(headers, rows)


def processes_table(med: Median, args: Any) -> str:
    """Drain jobs/s with more worker processes, as a multiple of the first count."""
    first, more = args.processes[0], args.processes[1:]
    rows = []
    for backend in backends(args.backend):
        name = NAMES[backend]
        rate = {p: med("drain", name, p, "jobs_per_s") for p in args.processes}
        last = args.processes[-1]
        rows.append(
            [
                name,
                *(fmt(rate[p], 0) for p in args.processes),
                *(fmt(rate[p] / rate[first], 2) for p in more),
                fmt(med("drain", name, last, "cores_busy"), 2),
                fmt(med("drain", name, last, "other_cores"), 2),
            ]
        )
    headers = [
        "system",
        *(f"jobs/s, {p} proc." for p in args.processes),
        *(f"{p} proc. / {first} proc." for p in more),
        f"cores busy ({args.processes[-1]} proc.)",
        "of which not ours",
    ]
    return f"Drain with more worker processes (medians):\n\n{table(headers, rows)}"


CPU_PER_JOB = {
    "latency": "worker_cpu_ms_per_job",
    "arq-latency": "worker_cpu_ms_per_job",
    "serve": "serve_cpu_ms_per_job",
    "serve-process": "serve_cpu_ms_per_job",
}
"""The CPU each pickup scenario spends per job: `ingest worker`'s alone, or all of `ingest
serve` (API and worker, its child processes included), never the database's or target's."""


def pickup_table(med: Median, args: Any) -> str:
    """Pickup latency: a separate `ingest worker` (submits from another process), and the
    embedded worker of `ingest serve` (submits through its own API)."""
    first = args.processes[0]

    def row(name: str, kind: str, how: str, drain: tuple[str, str] | None) -> list[str]:
        cpu = med(kind, name, 1, CPU_PER_JOB[kind])
        return [
            name,
            how,
            fmt(med(kind, name, 1, "p50_ms"), 1),
            fmt(med(kind, name, 1, "p99_ms"), 1),
            fmt(med(kind, name, 1, "done_p50_ms"), 1),
            fmt(med(kind, name, 1, "post_p50_ms"), 1),
            fmt(med(kind, name, 1, "post_p99_ms"), 1),
            fmt(cpu, 2),
            fmt(cpu / med(*drain, first, "worker_cpu_ms"), 2) if drain else "-",
            fmt(med(kind, name, 1, "other_cores"), 2),
        ]

    rows = []
    for backend in backends(args.backend):
        name = NAMES[backend]
        rows += [
            row(name, "latency", "`ingest worker`, JobStore.submit from another process",
                ("drain", name)),
            row(name, "serve", "`ingest serve` embedded worker, POST /jobs", None),
            row(name, "serve-process",
                "`ingest serve` worker process (INGEST_WORKER_PROCESS), POST /jobs", None),
        ]  # fmt: skip
    if "arq" in args.baseline:
        rows.append(
            row(
                ARQ_NAME,
                "arq-latency",
                "arq's worker, enqueue_job from the bench",
                ("arq", ARQ_NAME),
            )
        )
    headers = [
        "backend",
        "worker, submit",
        "pickup p50 ms",
        "pickup p99 ms",
        "submit -> done p50 ms",
        "POST p50 ms",
        "POST p99 ms",
        "CPU ms/job (the worker's; serve's: all of it)",
        "worker × its drain's",
        "not ours (cores)",
    ]
    title = (
        f"Pickup latency ({args.latency_rate:g} jobs/s for {args.latency_seconds:g} s,"
        f" poll {args.poll_ms:g} ms; medians of the rounds' percentiles):"
    )
    return f"{title}\n\n{table(headers, rows)}"


def hosts_table(med: Median, args: Any) -> str:
    first = args.processes[0]
    rows = []
    for backend in backends(args.backend):
        name = NAMES[backend]
        one, many = (med(kind, name, first, "jobs_per_s") for kind in ("drain", "hosts"))
        rows.append(
            [
                name,
                fmt(one, 0),
                fmt(many, 0),
                fmt(many / one, 2),
                fmt(med("drain", name, first, "worker_cpu_ms"), 2),
                fmt(med("hosts", name, first, "worker_cpu_ms"), 2),
                fmt(med("hosts", name, first, "other_cores"), 2),
            ]
        )
    n = f"{args.hosts:,} hosts"
    headers = [
        "system",
        "jobs/s, 1 host",
        f"jobs/s, {n}",
        f"{n} / 1 host",
        "worker CPU ms/job, 1 host",
        f"worker CPU ms/job, {n}",
        f"not ours ({n})",
    ]
    title = (
        f"Spread over many hosts ({args.jobs:,} jobs, {first} process,"
        f" INGEST_DOMAIN_MAX_IN_FLIGHT {domain_limit(args, first)}; medians):"
    )
    return f"{title}\n\n{table(headers, rows)}"


def slow_table(med: Median, args: Any) -> str:
    first = args.processes[0]
    delay = args.slow_delay_ms / 1000
    ceiling = args.concurrency * first / delay
    rows = []
    for backend in backends(args.backend):
        name = NAMES[backend]
        rate = med("slow", name, first, "jobs_per_s")
        rows.append(
            [
                name,
                fmt(rate, 0),
                fmt(ceiling, 0),
                fmt(rate / ceiling, 2),
                fmt(rate * delay, 1),
                fmt(med("slow", name, first, "worker_cpu_ms"), 2),
                fmt(med("slow", name, first, "other_cores"), 2),
            ]
        )
    headers = [
        "system",
        "jobs/s",
        "slots' ceiling (slots / delay)",
        "fraction of ceiling",
        f"slots busy on average (of {args.concurrency * first})",
        "worker CPU ms/job",
        "not ours (cores)",
    ]
    title = (
        f"Target answering after {args.slow_delay_ms:g} ms ({first} process,"
        f" INGEST_DOMAIN_MAX_IN_FLIGHT {domain_limit(args, first)}; medians):"
    )
    return f"{title}\n\n{table(headers, rows)}"


def submit_table(med: Median, args: Any) -> str:
    rows = []
    arrangements = (
        ("submit", "embedded, a thread"),
        ("submit-process", "embedded, a process (INGEST_WORKER_PROCESS)"),
        ("submit-split", "`ingest worker` apart"),
    )
    for backend in backends(args.backend):
        name = NAMES[backend]
        for kind, arrangement in arrangements:
            rows.append(
                [
                    name,
                    arrangement,
                    *(
                        fmt(med(kind, name, 1, key), 1)
                        for key in ("post_p50_ms", "post_p99_ms", "post_max_ms", "post_mean_ms")
                    ),
                    fmt(med(kind, name, 1, "drain_jobs_per_s"), 0),
                    fmt(med(kind, name, 1, "backlog_left"), 0),
                    fmt(med(kind, name, 1, "serve_cpu_cores"), 2),
                    fmt(med(kind, name, 1, "other_cores"), 2),
                ]
            )
    headers = [
        "backend",
        "worker",
        "POST p50 ms",
        "POST p99 ms",
        "POST max ms",
        "POST mean ms",
        "drained meanwhile, jobs/s",
        "backlog left at the end",
        "serve's CPU, its child's included (cores)",
        "not ours (cores)",
    ]
    title = (
        f"POST /jobs to `ingest serve` while a backlog of {args.submit_backlog:,} drains, by its"
        " embedded worker (a thread of serve, or serve's child process) or by one"
        " `ingest worker` beside it"
        f" ({args.submit_rate:g} POSTs/s for {args.submit_seconds:g} s; medians of the"
        " rounds' figures; target p99 <= 25 ms):"
    )
    return f"{title}\n\n{table(headers, rows)}"


def fair_table(med: Median, args: Any) -> str:
    rows = [
        [
            NAMES[backend],
            fmt(med("fair", NAMES[backend], 1, "p50_ms"), 1),
            fmt(med("fair", NAMES[backend], 1, "p99_ms"), 1),
            fmt(med("fair", NAMES[backend], 1, "other_cores"), 2),
        ]
        for backend in backends(args.backend)
    ]
    title = (
        f"Claim of 32 with {args.fair_pending:,} pending jobs, {args.fair_tenants} tenants,"
        f" {args.fair_domains:,} domains ({args.fair_repeats} claims a round; medians):"
    )
    headers = ["backend", "claim p50 ms", "claim p99 ms", "not ours (cores)"]
    return f"{title}\n\n{table(headers, rows)}"


def rss_table(med: Median, args: Any) -> str:
    rows = [
        [
            NAMES[backend],
            fmt(med("rss", NAMES[backend], 1, "pending_before"), 0),
            fmt(med("rss", NAMES[backend], 1, "rss_mb"), 1),
            fmt(med("rss", NAMES[backend], 1, "hwm_mb"), 1),
            fmt(med("rss", NAMES[backend], 1, "jobs_per_s"), 0),
            fmt(med("rss", NAMES[backend], 1, "other_cores"), 2),
        ]
        for backend in backends(args.backend)
    ]
    title = (
        f"One `ingest worker` after {args.rss_seconds:g} s of draining a queue of about"
        f" {args.big_pending:,} jobs (target < 200 MB; medians):"
    )
    headers = ["backend", "pending at start", "VmRSS MB", "VmHWM MB", "jobs/s", "not ours"]
    return f"{title}\n\n{table(headers, rows)}"


def startup_table(med: Median, args: Any) -> str:
    rows = [
        [
            f"`ingest --help` (median of {args.help_runs} a round)",
            "-",
            fmt(med("help", "ingest --help", 1, "help_ms"), 0),
            "0.5 s",
            fmt(med("help", "ingest --help", 1, "other_cores"), 2),
        ]
    ]
    rows += [
        [
            f"`ingest worker` exec -> first claim (median of {args.startup_runs} a round)",
            NAMES[backend],
            fmt(med("startup", NAMES[backend], 1, "first_claim_ms"), 0),
            "1.5 s",
            fmt(med("startup", NAMES[backend], 1, "other_cores"), 2),
        ]
        for backend in backends(args.backend)
    ]
    headers = ["command", "backend", "wall ms", "target (idle machine)", "not ours (cores)"]
    return f"Start-up (medians):\n\n{table(headers, rows)}"


def time_table(results: list[dict]) -> str:
    """Wall time per scenario, set-up included, over all rounds."""
    spent: dict[str, list[float]] = defaultdict(list)
    for r in results:
        spent[r["kind"]].append(r["seconds"])
    rows = [[kind, str(len(s)), fmt(sum(s), 0)] for kind, s in spent.items()]
    return "Time per scenario:\n\n" + table(["scenario", "runs", "seconds in all"], rows)
