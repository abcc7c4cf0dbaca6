"""Webhooks: POST a finished job to its `callback_url`, durably, signed, through the guard.

The loop: wait (wake-up | next due | poll | stop) -> claim due deliveries -> POST each ->
record delivered, pending with a `retry_after`, or dead. Deliveries are owed in the
transaction that finishes the job (`app.store.deliveries.owe`), so none is lost to a crash;
a POST may be repeated (a sender that dies after the answer), so receivers de-duplicate on
the job id and event. The body and its events: `Deliverer._deliver`; the signature: `sign`.

Failures are classified with the fetches' machinery and retried when
`app.rules.policy.delivery_retry_at` says (`Deliverer._post`). Only an answer's status and
Retry-After are looked at: its body is never read, so a receiver cannot make the sender
hold or inflate anything. A delivery never changes its job. This module issues no SQL
(`app.store.deliveries`) and never sleeps on a delivery: the next attempt time is written
to the row.
"""

import asyncio
import hashlib
import hmac
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from app import __version__
from app.clock import Clock
from app.fetch.guard import (
    BlockedDestination,
    Destinations,
    GuardedTransport,
    Resolver,
    guarded_client,
    system_resolver,
)
from app.model import (
    CallbackContent,
    ClaimedDelivery,
    CrawlStatus,
    DeliveryEvent,
    ErrorKind,
    Failure,
)
from app.observability import events
from app.rules import policy
from app.store.crawls import CrawlNotFound, CrawlStore
from app.store.deliveries import DeliveryStore
from app.store.jobs import JobStore
from app.store.jobs.errors import JobNotFound
from app.store.reads import ContentStore, Part
from app.wire import JobOut, missing_content
from app.wire.crawls import CrawlOut, RoundOut
from app.worker.loop import Loop, Wakeup

log = logging.getLogger("ingest.webhooks")

BATCH = 16
"""Deliveries claimed, and POSTed concurrently, at a time."""


def cut(text: str, max_bytes: int) -> tuple[str, bool]:
    """`text` cut to at most `max_bytes` of UTF-8 on a character boundary, and whether it
    was cut. The text is storable, so it encodes; a character cut in half is dropped."""
    encoded = text.encode()
    if len(encoded) <= max_bytes:
        return text, False
    return encoded[:max_bytes].decode(errors="ignore"), True


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The Ingest-Signature value: `sha256=` and the hex HMAC of `<timestamp>.<body>`.

    For receivers (README "Webhooks" shows how to check it)::

        Ingest-Timestamp: <unix seconds>
        Ingest-Signature: sha256=<hex HMAC-SHA256(INGEST_WEBHOOK_SECRET, "<timestamp>.<body>")>
    """
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + digest.hexdigest()


@dataclass(frozen=True, slots=True)
class DeliveryRules:
    """How callbacks are sent, built once from the settings by the composition root
    (`app.runtime`); when one is tried again is policy's (`app.rules.policy.RetryRules`)."""

    secret: SecretStr
    """The key of the Ingest-Signature (INGEST_WEBHOOK_SECRET); empty: unsigned."""
    timeout_seconds: float
    """Deadline of one POST (INGEST_WEBHOOK_TIMEOUT_SECONDS)."""
    lease_seconds: float
    """A claimed delivery is leased for this long past its POST's deadline."""
    content_max_bytes: int
    """Of a job's text or Markdown, this many bytes at most (INGEST_WEBHOOK_CONTENT_MAX_BYTES)."""
    poll_interval_seconds: float
    transient_errors: tuple[str, ...]
    transient_status_codes: frozenset[int]


class Deliverer:
    def __init__(
        self,
        deliveries: DeliveryStore,
        jobs: JobStore,
        contents: ContentStore,
        crawls: CrawlStore,
        rules: DeliveryRules,
        retry: policy.RetryRules,
        destinations: Destinations,
        clock: Clock,
        resolver: Resolver = system_resolver,
        rand: Callable[[], float] = random.random,
        wakeup: Wakeup | None = None,
    ) -> None:
        """`retry`: when policy tries a failed POST again; `destinations`: the SSRF guard's
        rules, as the composition root parsed them."""
        self.deliveries = deliveries
        self.jobs = jobs
        self.contents = contents
        self.crawls = crawls
        self.rules = rules
        self.retry = retry
        self.clock = clock
        self.rand = rand
        self.loop = Loop("webhooks", self.tick, log, wakeup)
        limits = httpx.Limits(max_connections=BATCH, max_keepalive_connections=BATCH)
        # The fetcher's guard: a callback URL is no way around the SSRF rules. A 3xx is
        # fatal (the receiver is misconfigured); one receiver's cookie is no other's business.
        self.client = guarded_client(
            GuardedTransport(destinations, limits, resolver),
            timeout=rules.timeout_seconds,
            # The answer's body is never read; no coding, so none could be inflated.
            headers={"User-Agent": f"ingest/{__version__} webhooks", "Accept-Encoding": "identity"},
        )

    def notify(self) -> None:
        """A delivery may be due now: look again."""
        self.loop.notify()

    def stop(self) -> None:
        """Stop claiming; `run` returns after the POSTs in flight."""
        self.loop.stop()

    async def run(self) -> None:
        if not self.rules.secret.get_secret_value():
            log.warning("INGEST_WEBHOOK_SECRET is empty: callbacks are sent unsigned")
        try:
            await self.loop.run()
        finally:
            await self.client.aclose()

    async def tick(self) -> float:
        """One pass: POST what is due; how long the loop may wait before the next."""
        sent = await self.deliver_due()
        return 0.0 if sent else await self._idle_timeout()

    async def deliver_due(self) -> int:
        """Claim the due deliveries and POST them; how many were claimed."""
        lease = self.rules.timeout_seconds + self.rules.lease_seconds
        claimed = await self.deliveries.claim(BATCH, self.clock(), lease)
        await asyncio.gather(*(self._deliver(c) for c in claimed))
        return len(claimed)

    async def _deliver(self, claimed: ClaimedDelivery) -> None:
        """POST `claimed` and record what came of it.

        The body is `{"event": ..., "job": <the job as GET /jobs/{id} answers it>}`; a job
        submitted with `callback_content` text or markdown adds `"content": {"format",
        "text", "truncated"}` (null when the job has none), its text cut to
        INGEST_WEBHOOK_CONTENT_MAX_BYTES. Events: `job.succeeded` (a first success),
        `job.dead`, and for refreshes `job.changed` (a new content version; the body adds
        `"change": {"from": {"version", "text_sha256"} | null, "to": {...}}`, from the
        version before the job's last, if still kept) and `job.gone` (404 or 410: dead, its
        last content kept). The job is as it is when the POST is made."""
        payload = await self._payload(claimed)
        if payload is None:  # deleted meanwhile; its deliveries went with it
            return
        body = json.dumps(payload, separators=(",", ":")).encode()
        started = time.perf_counter()
        failure = await self._post(claimed.url, body)
        duration_ms = int((time.perf_counter() - started) * 1000)
        now = self.clock()
        if failure is None:
            await self.deliveries.delivered(claimed, now)
            events.delivered(claimed, duration_ms)
            return
        try:
            retry_at = policy.delivery_retry_at(
                failure, claimed.attempt, claimed.max_attempts, now, self.retry, self.rand
            )
        except Exception as exc:  # a bug: this delivery ends, rather than fail the whole tick
            failure, retry_at = policy.unexpected(exc), None
        await self.deliveries.failed(claimed, failure, now, retry_at)
        events.delivery_failed(claimed, failure, retry_at, duration_ms)

    async def _payload(self, claimed: ClaimedDelivery) -> dict[str, Any] | None:
        """What `claimed` POSTs: its job's or its crawl's (`_crawl_payload`); None if that
        is gone."""
        if claimed.crawl_id is not None:
            return await self._crawl_payload(claimed.event, claimed.crawl_id)
        assert claimed.job_id is not None
        try:
            job = await self.jobs.get(claimed.job_id)
        except JobNotFound:
            return None
        payload: dict[str, Any] = {
            "event": claimed.event,
            "job": JobOut.of(job).model_dump(mode="json"),
        }
        if claimed.event == DeliveryEvent.JOB_CHANGED:
            payload["change"] = await self._change(job.id, job.content_version)
        if job.callback_content is not None:
            payload["content"] = await self._content(job.id, CallbackContent(job.callback_content))
        return payload

    async def _crawl_payload(self, event: str, crawl_id: str) -> dict[str, Any] | None:
        """A crawl's callback: `{"event", "crawl": <as GET /crawls/{id}>, "round": <as GET
        /crawls/{id}/rounds/{n}, the round that ended>}`."""
        try:
            crawl = await self.crawls.get(crawl_id)
        except CrawlNotFound:
            return None
        ended = crawl.round - 1 if crawl.status == CrawlStatus.RUNNING else crawl.round
        report = await self.crawls.round(crawl_id, ended) if ended else None
        return {
            "event": event,
            "crawl": CrawlOut.of(crawl, await self.crawls.counts(crawl_id)).model_dump(mode="json"),
            "round": None if report is None else RoundOut.of(report).model_dump(mode="json"),
        }

    async def _change(self, job_id: str, version: int | None) -> dict[str, Any]:
        """A `job.changed` callback's `change`: the job's last version, and the one before
        it (null when it is no longer kept)."""
        kept = {v.version: v for v in await self.contents.versions(job_id) or []}
        before = max((n for n in kept if version is not None and n < version), default=None)

        def named(number: int | None) -> dict[str, Any] | None:
            if number is None or number not in kept:
                return None
            return {"version": number, "text_sha256": kept[number].text_sha256}

        return {"from": named(before), "to": named(version)}

    async def _content(self, job_id: str, chosen: CallbackContent) -> dict[str, Any] | None:
        """The `content` of a callback that asked for `chosen`: null when the job has none
        (it died, or fetched a type with no text, or no Markdown was kept)."""
        part: Part = "markdown" if chosen is CallbackContent.MARKDOWN else "text"
        stored = await self.contents.get(job_id, part=part)
        if stored.status is None or missing_content(job_id, stored, part) is not None:
            return None
        assert isinstance(stored.data, str)
        text, truncated = cut(stored.data, self.rules.content_max_bytes)
        return {"format": chosen.value, "text": text, "truncated": truncated}

    async def _post(self, url: str, body: bytes) -> Failure | None:
        """POST `body`: None, or the failure as the fetches' machinery classifies it
        (`app.rules.policy.classify_exception`, `classify_status`, the same backoff
        settings); fatal answers (4xx, a blocked address) end the delivery at once."""
        timestamp = str(int(self.clock().timestamp()))
        headers = {"Content-Type": "application/json", "Ingest-Timestamp": timestamp}
        secret = self.rules.secret.get_secret_value()
        if secret:
            headers["Ingest-Signature"] = sign(secret, timestamp, body)
        try:
            request = self.client.build_request("POST", url, content=body, headers=headers)
            # One deadline for connect, send and the answer's head. Only the status and
            # Retry-After count: the body, whatever its size or coding, is never read.
            async with asyncio.timeout(self.rules.timeout_seconds):
                response = await self.client.send(request, stream=True)
                await response.aclose()
        except TimeoutError:
            message = f"no answer within {self.rules.timeout_seconds:g}s"
            return Failure(ErrorKind.TRANSIENT, "FetchTimeout", message)
        except BlockedDestination as exc:
            return Failure(ErrorKind.FATAL, "BlockedDestination", str(exc))
        except Exception as exc:
            return policy.classify_exception(exc, self.rules.transient_errors)
        return policy.classify_status(
            response.status_code,
            self.rules.transient_status_codes,
            response.headers.get("Retry-After"),
        )

    async def _idle_timeout(self) -> float:
        timeout = self.rules.poll_interval_seconds
        next_due = await self.deliveries.next_due_at()
        if next_due is not None:
            timeout = min(timeout, (next_due - self.clock()).total_seconds())
        return max(timeout, 0.001)
