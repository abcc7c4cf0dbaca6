"""Prometheus metrics: the instruments one process records into, and what a scrape returns.

Each app (and each `ingest worker` process) builds its own `Metrics` on a registry of its
own, never prometheus-client's global one, so two apps in one process (the tests) never
share counts. Nothing here counts anything by itself: `app.observability.events` does, once per
job transition.

Every process is scraped on its own (no multiprocess mode): `ingest serve` on
`GET /metrics`, `ingest worker` (and serve's worker process) on INGEST_METRICS_PORT
(`MetricsServer`). Counters and histograms are the process's own; sum them across processes
in PromQL. The gauges that describe the whole queue (jobs by status, oldest due job, paused
domains) are read from the database at scrape time by `GET /metrics` only.
"""

import contextlib
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    make_wsgi_app,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, generate_latest
from prometheus_client.registry import Collector

from app.keys import ADMIN, Keys

# A fetch is bounded by INGEST_FETCH_TIMEOUT_SECONDS (30 s by default).
FETCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0)
# From "picked up at once" to "a backlog of an hour".
LAG_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0)
# A callback POST is bounded by INGEST_WEBHOOK_TIMEOUT_SECONDS (10 s by default).
WEBHOOK_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The instruments of one process, on a registry of their own. The registry also carries
    the process's own resources (`process_*`: CPU, memory, open files) and the garbage
    collector's counts (`python_gc_*`), as prometheus-client's default registry would."""

    def __init__(self) -> None:
        # prometheus-client's switch for the `_created` series of counters and histograms
        # is one flag for the whole process (read at each scrape), not a registry's. Every
        # registry of an ingest process is a `Metrics`', so building one turns it off.
        disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream
        self.registry = CollectorRegistry()
        registry = self.registry
        ProcessCollector(registry=registry)
        GCCollector(registry=registry)
        self.submitted = Counter(
            "ingest_jobs_submitted",
            "Jobs accepted (POST /jobs, POST /jobs/batch).",
            [],
            registry=registry,
        )
        self.attempts = Counter(
            "ingest_attempts",
            "Attempts that ended, by outcome (succeeded, not_modified and unchanged for a "
            "refresh that kept its content, not_kept for a change past its tenant's storage "
            "quota, transient, rate_limited, fatal, interrupted; for failures this is the "
            "error kind) and error type.",
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
        self.webhook_deliveries = Counter(
            "ingest_webhook_deliveries",
            "Callback POSTs that ended, by outcome: delivered, retrying (failed, tried again "
            "later) or dead (failed for good).",
            ["outcome"],
            registry=registry,
        )
        self.webhook_duration = Histogram(
            "ingest_webhook_duration_seconds",
            "Duration of one callback POST (connect, send, the answer's head), by outcome.",
            ["outcome"],
            buckets=WEBHOOK_BUCKETS,
            registry=registry,
        )
        self.loop_up = Gauge(
            "ingest_worker_up",
            "1 while the loop runs, 0 once it stopped; loop: worker (jobs) or webhooks.",
            ["loop"],
            registry=registry,
        )
        self.loop_last_tick = Gauge(
            "ingest_worker_last_tick_timestamp_seconds",
            "Unix time the loop last finished a pass without error (an idle loop passes at "
            "least every INGEST_POLL_INTERVAL_SECONDS).",
            ["loop"],
            registry=registry,
        )

    def running(self, loop: str) -> bool:
        """Whether `loop` (worker, webhooks) runs, as `ingest_worker_up` says."""
        return self.registry.get_sample_value("ingest_worker_up", {"loop": loop}) == 1

    def serve(self, port: int, host: str, *, admins: Keys, timeout: float) -> "MetricsServer":
        """Serve, in a thread, `GET /metrics` (this registry) and `GET /healthz` (200 while
        the job worker's loop runs, else 503) on http://host:port; any other path is 404.
        For `ingest worker`, whose process has no API to answer them.

        With `admins` set, `/metrics` needs one of them as a Bearer token (else 401), as
        serve's does; `/healthz` needs none, as serve's. A connection that sends nothing for
        `timeout` seconds is closed."""
        return MetricsServer.start(host, port, _endpoints(self, admins), timeout)


def _endpoints(metrics: Metrics, admins: Keys) -> Callable[..., Iterable[bytes]]:
    """The WSGI app of a worker's metrics port."""
    scrape = make_wsgi_app(metrics.registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            if not _admitted(environ.get("HTTP_AUTHORIZATION", ""), admins):
                challenge = [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")]
                start_response("401 Unauthorized", challenge)
                return [b"this needs an admin API key: Authorization: Bearer <key>\n"]
            scraped: Iterable[bytes] = scrape(environ, start_response)
            return scraped
        if path == "/healthz":
            up = metrics.running("worker")
            body = json.dumps({"status": "ok" if up else "worker not running"}).encode()
            status = "200 OK" if up else "503 Service Unavailable"
            start_response(status, [("Content-Type", "application/json")])
            return [body]
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found: this port serves /metrics and /healthz\n"]

    return app


def _admitted(authorization: str, admins: Keys) -> bool:
    """Whether a request with this `Authorization` header may scrape: any while no key is
    set, else one with an admin's key (the API's check of a key, `app.keys`)."""
    if not admins:
        return True
    scheme, _, key = authorization.partition(" ")
    return scheme.lower() == "bearer" and admins.tenant_of(key) == ADMIN


MAX_CONNECTIONS = 16
"""Connections a metrics port serves at once, a thread each; one more is closed unread.
Prometheus scrapes a target one request at a time: this leaves room for several scrapers
and health checks, and keeps a crowd of idle connections from growing the process."""


class _Quiet(WSGIRequestHandler):
    """No line per scrape on stderr, nor a traceback for a connection that went silent."""

    def handle(self) -> None:
        # The socket's timeout (the server's `timeout`) ran out: the server closes it.
        with contextlib.suppress(TimeoutError):
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingWSGIServer):
    """A thread per connection (a daemon: closing the server does not wait for it), at
    most MAX_CONNECTIONS at once."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()  # no thread started to give it back
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


@dataclass(frozen=True)
class MetricsServer:
    """A worker process's scrape endpoint, on INGEST_METRICS_PORT at INGEST_METRICS_HOST:
    `/metrics` (for an admin key while keys are set, as serve's) and the worker's `/healthz`,
    nothing else; a connection silent for INGEST_METRICS_TIMEOUT_SECONDS is closed."""

    server: WSGIServer
    thread: threading.Thread

    @classmethod
    def start(
        cls, host: str, port: int, app: Callable[..., Iterable[bytes]], timeout: float
    ) -> "MetricsServer":
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        server_class = type("Server", (_Server,), {"address_family": family})
        handler_class = type("Handler", (_Quiet,), {"timeout": timeout})
        server: WSGIServer = make_server(host, port, app, server_class, handler_class)
        thread = threading.Thread(target=server.serve_forever, name="metrics", daemon=True)
        thread.start()
        return cls(server, thread)

    @property
    def port(self) -> int:
        """The port bound (the one asked for, or the one the system chose for 0)."""
        return int(self.server.server_address[1])

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
