"""The settings as each part reads them: made here once, from `Settings`, for the composition
root (`app.runtime`), which hands each part its own view instead of the whole settings.

A view is a small frozen dataclass defined beside the module that reads it, holding just the
numbers that module decides with; no module below the root imports `Settings`, and a test
builds a view with the numbers it depends on. This module only maps settings onto views
(which view is defined where, and who reads it: `PartSettings`).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.fetch.guard import Destinations
from app.settings import Settings

if TYPE_CHECKING:
    from app.fetch.fetcher import FetchLimits
    from app.fetch.robots_reader import RobotsLimits
    from app.rules.crawl_options import CrawlLimits
    from app.rules.policy import RetryRules
    from app.rules.scheduling import ShareRules
    from app.store.record import RecordRules
    from app.worker.completer import Batching
    from app.worker.crawler import CrawlRules
    from app.worker.job_worker import WorkerRules
    from app.worker.maintenance import MaintenanceRules
    from app.worker.webhooks import DeliveryRules


@dataclass(frozen=True, slots=True)
class PartSettings:
    """Every part's view of one `Settings`:

    ================== ========================== ===============================================
    view               defined in                 read by
    ================== ========================== ===============================================
    `RetryRules`       app/rules/policy.py        policy: the backoff formula, deferrals, pauses
                                                  (passed by the worker, the completer, webhooks)
    `ShareRules`       app/rules/scheduling.py    scheduling and the store's claim; the worker
    `RecordRules`      app/store/record.py        the store's record (through `Queue`)
    `FetchLimits`      app/fetch/fetcher.py       the fetcher, and robots.txt's reads
    `RobotsLimits`     app/fetch/robots_reader.py robots.txt's cache
    `Batching`         app/worker/completer.py    the completer
    `WorkerRules`      app/worker/job_worker.py   the worker
    `MaintenanceRules` app/worker/maintenance.py  the maintenance service
    `DeliveryRules`    app/worker/webhooks.py     the webhook sender
    `CrawlRules`       app/worker/crawler.py      the crawl loop
    `Destinations`     app/fetch/guard.py         the SSRF guard: the API, fetcher and webhooks
    ================== ========================== ===============================================
    """

    retry: "RetryRules"
    shares: "ShareRules"
    records: "RecordRules"
    fetch: "FetchLimits"
    robots: "RobotsLimits"
    """Read for the tenants that obey robots.txt, and for every crawl's pages."""
    batching: "Batching"
    worker: "WorkerRules"
    maintenance: "MaintenanceRules"
    crawls: "CrawlRules"
    deliveries: "DeliveryRules"

    @classmethod
    def of(cls, settings: Settings) -> "PartSettings":
        # Imported as views are made, not with this module: the root of an operator's
        # command (`app.cli.runner`) parses the destinations here and builds no worker, so
        # it loads none of the fetcher's, the worker's and the webhooks' modules.
        from app.content.extract import ExtractionLimits
        from app.content.hostile import PageCaps
        from app.fetch.fetcher import FetchLimits
        from app.fetch.pool import PoolSettings
        from app.fetch.robots_reader import RobotsLimits
        from app.rules.policy import RetryRules
        from app.rules.scheduling import ShareRules
        from app.store.record import RecordRules
        from app.worker.completer import Batching
        from app.worker.crawler import CRAWL_IDLE_SECONDS, CRAWL_INTERVAL_SECONDS, CrawlRules
        from app.worker.job_worker import WorkerRules
        from app.worker.maintenance import MaintenanceRules
        from app.worker.webhooks import DeliveryRules

        obey = settings.robots_txt == "obey"
        tenants_obey = {t: rule == "obey" for t, rule in settings.tenant_robots_txt.items()}
        return cls(
            retry=RetryRules(
                backoff_base_seconds=settings.backoff_base_seconds,
                backoff_max_seconds=settings.backoff_max_seconds,
                backoff_jitter=settings.backoff_jitter,
                max_deferrals=settings.max_deferrals,
                retry_after_max_seconds=settings.retry_after_max_seconds,
                domain_failure_threshold=settings.domain_failure_threshold,
            ),
            shares=ShareRules(
                domain_max_in_flight=settings.domain_max_in_flight,
                domain_min_interval_seconds=settings.domain_min_interval_seconds,
                # A Crawl-delay is kept only once read, for a tenant or a crawl that obeys.
                robots_crawl_delay_max_seconds=settings.robots_crawl_delay_max_seconds,
                tenant_max_in_flight=settings.tenant_max_in_flight,
                tenant_weights=settings.tenant_weights,
            ),
            records=RecordRules(
                content_versions=settings.content_versions,
                webhook_max_attempts=settings.webhook_max_attempts,
            ),
            fetch=FetchLimits(
                connections=settings.worker_concurrency,
                connect_timeout_seconds=settings.connect_timeout_seconds,
                read_timeout_seconds=settings.read_timeout_seconds,
                fetch_timeout_seconds=settings.fetch_timeout_seconds,
                max_redirects=settings.max_redirects,
                max_body_bytes=settings.max_body_bytes,
                allowed_content_types=settings.allowed_content_types,
                user_agent=settings.user_agent,
                transient_errors=settings.transient_errors,
                transient_status_codes=settings.transient_status_codes,
                extraction=PoolSettings(
                    processes=settings.extraction_processes,
                    timeout_seconds=settings.extract_timeout_seconds,
                    memory_mb=settings.extract_memory_mb,
                    limits=ExtractionLimits(
                        pdf_max_pages=settings.pdf_max_pages,
                        max_links=settings.links_max_per_page,
                        page=PageCaps(
                            elements=settings.extract_max_elements,
                            attributes=settings.extract_max_attributes,
                            attributes_per_element=settings.extract_max_attributes_per_element,
                        ),
                    ),
                    tenant_weights=settings.tenant_weights,
                ),
            ),
            robots=RobotsLimits(
                cache_seconds=settings.robots_cache_seconds,
                max_bytes=settings.robots_max_bytes,
                unreachable_max_seconds=settings.robots_unreachable_max_seconds,
                obey=obey,
                tenants=tenants_obey,
            ),
            batching=Batching(
                slots=settings.worker_concurrency,
                record_delay_seconds=settings.record_delay_seconds,
                lease_seconds=settings.lease_seconds,
                storage_quota_bytes=settings.tenant_max_storage_bytes,
            ),
            worker=WorkerRules(
                concurrency=settings.worker_concurrency,
                prefetch=settings.prefetch,
                prefetch_seconds=settings.worker_prefetch_seconds,
                lease_seconds=settings.lease_seconds,
                poll_interval_seconds=settings.poll_interval_seconds,
                shutdown_grace_seconds=settings.shutdown_grace_seconds,
            ),
            maintenance=MaintenanceRules(
                lease_seconds=settings.lease_seconds,
                poll_interval_seconds=settings.poll_interval_seconds,
                retention_days=settings.retention_days,
            ),
            deliveries=DeliveryRules(
                secret=settings.webhook_secret,
                timeout_seconds=settings.webhook_timeout_seconds,
                lease_seconds=settings.lease_seconds,
                content_max_bytes=settings.webhook_content_max_bytes,
                poll_interval_seconds=settings.poll_interval_seconds,
                transient_errors=settings.transient_errors,
                transient_status_codes=settings.transient_status_codes,
            ),
            crawls=CrawlRules(
                window=settings.crawl_window,
                interval_seconds=min(settings.poll_interval_seconds, CRAWL_INTERVAL_SECONDS),
                idle_seconds=CRAWL_IDLE_SECONDS,
                listing_max_bytes=settings.crawl_listing_max_bytes,
                listing_max_entries=settings.crawl_listing_max_entries,
            ),
        )


def destinations_of(settings: Settings) -> Destinations:
    """Where fetches and callbacks may go, parsed once per process: a long
    INGEST_BLOCKED_HOSTS is slow to parse (docs/design/fetch.md)."""
    return Destinations.parse(
        settings.allow_private_networks,
        settings.allowed_ports,
        settings.allowed_hosts,
        settings.blocked_hosts,
    )


def crawl_limits(settings: Settings) -> "CrawlLimits":
    """What the settings allow a crawl, as `POST /crawls` and `ingest crawl` check it."""
    from app.rules.crawl_options import CrawlLimits

    return CrawlLimits(
        settings.crawl_max_pages,
        settings.refresh_min_seconds,
        settings.crawl_may_ignore_robots_txt,
    )
