"""Prometheus metrics: the instruments one process records into, and what a scrape returns.

Each app (and each `ingest worker` process) builds its own `Metrics` on a registry of its
own, never prometheus-client's global one, so two apps in one process (the tests) never
share counts. Nothing here counts anything by itself: `app.observability` does, once per
job transition.

Every process is scraped on its own (no multiprocess mode): `ingest serve` on
`GET /metrics`, `ingest worker` on INGEST_METRICS_PORT. Counters and histograms are the
process's own; sum them across processes in PromQL. The gauges that describe the whole
queue (jobs by status, oldest due job, paused domains) are read from the database at
scrape time by `GET /metrics` only, so worker processes do not repeat them.
"""

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

# A fetch is bounded by INGEST_FETCH_TIMEOUT_SECONDS (30 s by default).
FETCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
# From "picked up at once" to "a backlog of an hour".
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)


class Metrics:
    """The instruments of one process, on a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.submitted = Counter(
            "ingest_jobs_submitted",
            "Jobs accepted (POST /jobs, POST /jobs/batch).",
            [],
            registry=registry,
        )
        self.attempts = Counter(
            "ingest_attempts",
            "Attempts that ended, by outcome (succeeded, transient, rate_limited, fatal, "
            "interrupted; for failures this is the error kind) and error type.",
            ["outcome", "error_type"],
            registry=registry,
        )
        self.finished = Counter(
            "ingest_jobs_finished",
            "Jobs the workers brought to a final status (succeeded or dead), by dead reason.",
            ["status", "dead_reason"],
            registry=registry,
        )
        self.domain_pauses = Counter(
            "ingest_domain_pauses", "Times a domain was paused after failures.", registry=registry
        )
        self.fetch_duration = Histogram(
            "ingest_fetch_duration_seconds",
            "Duration of one fetch (redirects and body included), by attempt outcome.",
            ["outcome"],
            buckets=FETCH_BUCKETS,
            registry=registry,
        )
        self.queue_lag = Histogram(
            "ingest_queue_lag_seconds",
            "Time from a job becoming due (its retry_after, else when it became pending) to "
            "its attempt's start.",
            buckets=LAG_BUCKETS,
            registry=registry,
        )

    def serve(self, port: int, host: str) -> "MetricsServer":
        """Serve this registry on http://host:port/metrics in a thread (for `ingest worker`)."""
        server, thread = start_http_server(port, host, registry=self.registry)
        return MetricsServer(server, thread)


@dataclass(frozen=True)
class MetricsServer:
    server: WSGIServer
    thread: threading.Thread

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@dataclass(frozen=True)
class QueueGauges:
    """The queue as the database sees it at scrape time."""

    jobs_by_status: Mapping[str, int]
    oldest_due_age_seconds: float | None
    """How long the longest-waiting due pending job has been due; None if none is due."""
    paused_domains: int


class _Gauges(Collector):
    """A one-off collector of values read before the scrape (collectors cannot await)."""

    def __init__(self, gauges: QueueGauges | None) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "ingest_database_up", "1 if the database answered this scrape's queries, else 0."
        )
        up.add_metric([], 0 if self.gauges is None else 1)
        yield up
        if self.gauges is None:
            return
        jobs = GaugeMetricFamily(
            "ingest_jobs", "Jobs in the database, by status.", labels=["status"]
        )
        for status, count in sorted(self.gauges.jobs_by_status.items()):
            jobs.add_metric([status], count)
        yield jobs
        yield GaugeMetricFamily(
            "ingest_oldest_due_job_age_seconds",
            "How long the longest-waiting due pending job has been due (0 if none is due).",
            value=self.gauges.oldest_due_age_seconds or 0.0,
        )
        yield GaugeMetricFamily(
            "ingest_paused_domains", "Domains paused right now.", value=self.gauges.paused_domains
        )


def exposition(metrics: Metrics, gauges: QueueGauges | None) -> bytes:
    """The text a scrape returns: the process's instruments, then the queue gauges.

    `gauges` is None when the database could not be read: the instruments are still served,
    and `ingest_database_up` is 0.
    """
    return generate_latest(metrics.registry) + generate_latest(_Gauges(gauges))
