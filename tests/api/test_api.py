"""The HTTP contract on both backends: status codes, bodies, problems, pagination."""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import pytest
from sqlalchemy.exc import IntegrityError

from app.clock import utc_now
from app.model import DeadReason, ErrorKind, Failure, MarkDead, NewJob
from app.rules import policy
from app.store.database import Database
from app.store.jobs import JobStore
from tests.conftest import eventually, running_app, wait_for_status
from tests.support.outcomes import failed, record
from tests.support.stores import queue_on
from tests.support.webserver import ScriptedServer

URL = "http://example.test/page"


async def post_job(client, **fields):
    return await client.post("/jobs", json={"url": URL, **fields})


@pytest.fixture
async def app_client(make_settings):
    async with running_app(make_settings(worker_enabled=False)) as (app, client):
        yield app, client


async def kill(app, job_id: str) -> None:
    """Run the job's attempt by hand and record a fatal failure: the job is dead."""
    queue = queue_on(app.state.runtime.database, app.state.runtime.settings)
    now = datetime.now(UTC)
    leases = await queue.claim("t", 100, now, 60)
    (lease,) = [lease for lease in leases if lease.id == job_id]
    for other in leases:
        if other is not lease:
            assert await record(queue, policy.handed_back(other, now), now)
    failure = Failure(ErrorKind.FATAL, "HTTPStatus", "HTTP 404", 404)
    assert await record(queue, failed(lease, MarkDead(DeadReason.FATAL, failure)), now)


async def test_submit_returns_the_pending_job(client):
    """POST /jobs answers 201 with Location and the job, defaults filled in."""
    response = await post_job(client, url="http://Example.TEST:8080/x", metadata={"k": [1]})
    job = response.json()
    assert 201 == response.status_code
    assert f"/jobs/{job['id']}" == response.headers["location"]
    assert {
        "url": "http://Example.TEST:8080/x",
        "url_key": "http://example.test:8080/x",
        "domain": "example.test:8080",
        "tenant": "default",
        "status": "pending",
        "priority": 0,
        "attempts": 0,
        "max_attempts": 4,
        "deferrals": 0,
        "retry_after": None,
        "blocked_by": None,
        "last_error": None,
        "dead_reason": None,
        "result": None,
        "metadata": {"k": [1]},
        "callback_url": None,
        "callback_content": "none",
        "refresh_every": None,
        "version": None,
        "crawl": None,
    } == {k: job[k] for k in job if not k.endswith("_at") and k != "id"}
    assert job["created_at"].endswith("Z")
    assert job == (await client.get(f"/jobs/{job['id']}")).json()


async def test_not_before_in_the_future_is_the_retry_after(client):
    """A job submitted with not_before waits until then."""
    later = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    job = (await post_job(client, not_before=later.isoformat())).json()
    assert later == datetime.fromisoformat(job["retry_after"])


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"url": "ftp://example.test/"}, "scheme must be http or https"),
        ({"url": "http:///nohost"}, "must have a host"),
        ({"url": "http://example.test/" + "a" * 2048}, "longer than 2048"),
        ({"url": "not a url"}, "whitespace"),
        ({}, "Field required"),
        ({"url": URL, "priority": 10**6}, "less than or equal"),
        ({"url": URL, "max_attempts": 0}, "greater than or equal"),
        ({"url": URL, "not_before": "2026-01-01T00:00:00"}, "timezone"),
        ({"url": URL, "colour": "red"}, "Extra inputs"),
        ({"url": URL, "tenant": "a b"}, "pattern"),
        ({"url": URL, "callback_url": "gopher://x"}, "scheme"),
    ],
)
async def test_bad_job_is_422_with_a_clear_message(client, body, needle):
    """Malformed submissions are rejected with FastAPI's 422 shape, saying why."""
    response = await client.post("/jobs", json=body)
    assert 422 == response.status_code
    assert needle in str(response.json()["detail"])


async def test_malformed_json_is_422(client):
    """A body that is not JSON is a 422, not a 500."""
    response = await client.post(
        "/jobs", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert 422 == response.status_code


async def test_batch_is_all_or_nothing(client):
    """One bad item rejects the whole batch and stores nothing; a good batch is 201."""
    bad = {"jobs": [{"url": URL}, {"url": "ftp://x"}]}
    assert 422 == (await client.post("/jobs/batch", json=bad)).status_code
    assert 0 == (await client.get("/stats")).json()["counts"]["pending"]
    good = await client.post("/jobs/batch", json={"jobs": [{"url": URL}] * 3})
    assert (201, 3) == (good.status_code, len(good.json()["items"]))
    assert 422 == (await client.post("/jobs/batch", json={"jobs": []})).status_code
    too_many = {"jobs": [{"url": URL}] * 1001}
    assert 422 == (await client.post("/jobs/batch", json=too_many)).status_code


async def test_idempotency_key(client):
    """Same key and body: 200 and the same job. Other body: 409. Other tenant: a new job."""
    key = {"Idempotency-Key": "abc"}
    first = await client.post("/jobs", json={"url": URL}, headers=key)
    again = await client.post("/jobs", json={"url": URL}, headers=key)
    other_body = await client.post("/jobs", json={"url": URL + "2"}, headers=key)
    other_tenant = await client.post("/jobs", json={"url": URL, "tenant": "b"}, headers=key)
    assert (201, 200) == (first.status_code, again.status_code)
    assert first.json()["id"] == again.json()["id"]
    assert f"/jobs/{first.json()['id']}" == again.headers["location"]
    assert 409 == other_body.status_code
    assert "application/problem+json" == other_body.headers["content-type"]
    assert 201 == other_tenant.status_code
    assert first.json()["id"] != other_tenant.json()["id"]


async def test_the_database_holds_one_job_per_tenant_and_idempotency_key(database_url):
    """What settles two submits racing with one key: the database refuses a second job of a
    tenant under a key (on PostgreSQL a partial index of the jobs with a key, migration
    0016), and takes the same key for another tenant and any number of jobs without one."""

    def new(tenant: str, key: str | None) -> NewJob:
        return NewJob(URL, "example.com", tenant, max_attempts=1, idempotency_key=key)

    database = Database(database_url)
    store = JobStore(database, utc_now)
    try:
        await store.submit([new("a", "k"), new("b", "k"), new("a", None), new("a", None)])
        with pytest.raises(IntegrityError):
            await store.submit([new("a", "k")])
        counts = (await store.stats()).counts
    finally:
        await database.dispose()
    assert 4 == counts["pending"]


async def test_pagination_newest_first_without_gaps(client):
    """Pages of 3 walk all 7 jobs newest first, each once, and end with a null cursor."""
    ids = [(await post_job(client, metadata={"i": i})).json()["id"] for i in range(7)]
    seen, cursor, pages = [], None, 0
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = (await client.get("/jobs", params=params)).json()
        seen += [job["id"] for job in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert list(reversed(ids)) == seen
    assert 3 == pages


@pytest.mark.parametrize(
    ("params", "status"),
    [
        ({"limit": 0}, 422),
        ({"limit": 501}, 422),
        ({"status": "bogus"}, 422),
        ({"cursor": "!!!"}, 400),
        ({"cursor": "bm9wZQ"}, 400),
    ],
)
async def test_bad_list_query(client, params, status):
    """Bad limits and statuses are 422; a cursor we did not issue is a 400 problem."""
    response = await client.get("/jobs", params=params)
    assert status == response.status_code


async def test_list_filters(app_client):
    """status, domain and tenant filters select exactly the matching jobs."""
    app, client = app_client
    a = (await post_job(client, url="http://a.test/")).json()
    b = (await post_job(client, url="http://b.test/", tenant="other")).json()
    await kill(app, a["id"])

    async def ids(**params):
        return [job["id"] for job in (await client.get("/jobs", params=params)).json()["items"]]

    assert [a["id"]] == await ids(status="dead")
    assert [b["id"], a["id"]] == await ids(status="dead,pending")
    assert [b["id"]] == await ids(domain="B.test")
    assert [b["id"]] == await ids(tenant="other")


async def test_unknown_job_is_a_404_problem(client):
    """Unknown ids answer 404 as RFC 9457 problem details."""
    response = await client.get("/jobs/nope")
    assert 404 == response.status_code
    assert "application/problem+json" == response.headers["content-type"]
    assert {
        "type": "about:blank",
        "title": "Not Found",
        "status": 404,
        "detail": "no job nope",
    } == (response.json())
    for path in ("/jobs/nope/attempts", "/jobs/nope/retry", "/jobs/nope/cancel"):
        method = client.get if path.endswith("attempts") else client.post
        assert 404 == (await method(path)).status_code
    assert 404 == (await client.get("/no/such/route")).status_code


async def test_retry_dead_job_gives_a_fresh_budget(app_client):
    """A dead job retried is pending, attempts 0, dead_reason cleared, history kept."""
    app, client = app_client
    job = (await post_job(client)).json()
    await kill(app, job["id"])
    response = await client.post(f"/jobs/{job['id']}/retry")
    retried = response.json()
    assert 200 == response.status_code
    assert ("pending", 0, None, None) == (
        retried["status"],
        retried["attempts"],
        retried["dead_reason"],
        retried["retry_after"],
    )
    history = (await client.get(f"/jobs/{job['id']}/attempts")).json()["items"]
    assert ["fatal"] == [a["outcome"] for a in history]


async def test_retry_pending_makes_it_due_now(client):
    """Retrying a waiting pending job clears its retry_after."""
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    job = (await post_job(client, not_before=later)).json()
    retried = (await client.post(f"/jobs/{job['id']}/retry")).json()
    assert ("pending", None) == (retried["status"], retried["retry_after"])


async def test_retry_running_is_409(app_client):
    """Running jobs cannot be retried."""
    app, client = app_client
    job = (await post_job(client)).json()
    await queue_on(app.state.runtime.database, app.state.runtime.settings).claim(
        "w", 1, datetime.now(UTC), 60
    )
    response = await client.post(f"/jobs/{job['id']}/retry")
    assert 409 == response.status_code
    assert "is running" in response.json()["detail"]


async def test_bulk_retry(app_client):
    """POST /jobs/retry?status=dead requeues every dead job, filtered by domain."""
    app, client = app_client
    jobs = [(await post_job(client, url=f"http://{d}.test/")).json() for d in "aab"]
    for job in jobs:
        await kill(app, job["id"])
    only_b = await client.post("/jobs/retry", params={"status": "dead", "domain": "b.test"})
    rest = await client.post("/jobs/retry", params={"status": "dead"})
    assert (1, 2) == (only_b.json()["requeued"], rest.json()["requeued"])
    assert 3 == (await client.get("/stats")).json()["counts"]["pending"]
    wrong = await client.post("/jobs/retry", params={"status": "pending"})
    assert 422 == wrong.status_code


async def test_cancel(client):
    """Pending jobs cancel; cancelling again is 409; a cancelled job can be retried."""
    job = (await post_job(client)).json()
    cancelled = await client.post(f"/jobs/{job['id']}/cancel")
    again = await client.post(f"/jobs/{job['id']}/cancel")
    retried = await client.post(f"/jobs/{job['id']}/retry")
    assert ("cancelled", 409) == (cancelled.json()["status"], again.status_code)
    assert "pending" == retried.json()["status"]


async def test_stats(app_client):
    """Counts per status and the age of the oldest pending job."""
    app, client = app_client
    empty = (await client.get("/stats")).json()
    jobs = [(await post_job(client)).json() for _ in range(3)]
    await kill(app, jobs[0]["id"])
    await client.post(f"/jobs/{jobs[1]['id']}/cancel")
    stats = (await client.get("/stats")).json()
    assert {"pending": 0, "running": 0, "succeeded": 0, "dead": 0, "cancelled": 0} == (
        empty["counts"]
    )
    assert None is empty["oldest_pending_age_seconds"]
    assert {"pending": 1, "running": 0, "succeeded": 0, "dead": 1, "cancelled": 1} == (
        stats["counts"]
    )
    assert 0 <= stats["oldest_pending_age_seconds"] < 60


async def test_health_and_readiness(app_client):
    """healthz is up; readyz is 200 with the database and 503 without it."""
    app, client = app_client
    assert {"status": "ok"} == (await client.get("/healthz")).json()
    assert 200 == (await client.get("/readyz")).status_code
    working = app.state.runtime.database
    app.state.runtime.database = Database("postgresql://nobody@127.0.0.1:1/none")
    try:
        response = await client.get("/readyz")
    finally:
        await app.state.runtime.database.dispose()
        app.state.runtime.database = working
    assert 503 == response.status_code
    assert "application/problem+json" == response.headers["content-type"]


async def test_docs_are_served_without_a_cdn(client):
    """Swagger UI loads its script and style from this service."""
    page = (await client.get("/docs")).text
    assert "cdn" not in page.lower()
    assert "/static-offline-docs/swagger-ui-bundle.js" in page
    script = await client.get("/static-offline-docs/swagger-ui-bundle.js")
    assert 200 == script.status_code
    assert len(script.content) > 100_000


async def test_delete_answers_204_without_body_or_content_type(client):
    """DELETE /jobs/{id}: 204 with no body and no content-type (there is no content)."""
    job = (await post_job(client)).json()
    assert 200 == (await client.post(f"/jobs/{job['id']}/cancel")).status_code
    response = await client.delete(f"/jobs/{job['id']}")
    assert (204, b"", None) == (
        response.status_code,
        response.content,
        response.headers.get("content-type"),
    )


def request_examples(schema: dict[str, Any]) -> Iterator[tuple[str, str, Any]]:
    """(method, path, body) for every request body example of every operation: the
    media type's own, and its schema's (the first is what Swagger UI fills in). Fails for an
    operation with a request body and no example."""
    components = schema["components"]["schemas"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            for media in operation.get("requestBody", {}).get("content", {}).values():
                body_schema = media["schema"]
                if "$ref" in body_schema:
                    body_schema = components[body_schema["$ref"].rsplit("/", 1)[1]]
                examples = [
                    *([media["example"]] if "example" in media else []),
                    *(named["value"] for named in media.get("examples", {}).values()),
                    *body_schema.get("examples", []),
                ]
                assert examples, f"{method.upper()} {path} has no request example"
                for example in examples:
                    yield method, path, example


def served_by(web: ScriptedServer, value: Any) -> Any:
    """The example with each http(s) URL in it moved to the test server, path kept."""
    if isinstance(value, dict):
        return {key: served_by(web, item) for key, item in value.items()}
    if isinstance(value, list):
        return [served_by(web, item) for item in value]
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        url = urlsplit(value)
        return web.url(url.path or "/") + (f"?{url.query}" if url.query else "")
    return value


async def pages_once_ended(client, crawl: dict[str, Any]) -> list[dict[str, Any]]:
    """The pages (jobs) of `crawl` once it has ended."""

    async def ended() -> bool:
        return (await client.get(f"/crawls/{crawl['id']}")).json()["status"] != "running"

    await eventually(ended)
    pages: list[dict[str, Any]] = (await client.get(f"/crawls/{crawl['id']}/pages")).json()["items"]
    return pages


async def test_every_request_example_is_accepted_and_fetched(make_settings, web):
    """What the schema shows as an example body (Swagger UI's "Try it out") is a request
    that works: each is answered 2xx, and its jobs, their URLs on the test server, succeed."""
    async with running_app(make_settings()) as (app, client):
        examples = list(request_examples(app.openapi()))
        assert {("post", "/jobs"), ("post", "/jobs/batch")} <= {(m, p) for m, p, _ in examples}
        answers = [
            await client.request(method, path, json=served_by(web, example))
            for method, path, example in examples
        ]
        assert [] == [answer.text for answer in answers if not 200 <= answer.status_code < 300]
        crawls = [answer.json() for answer in answers if answer.url.path == "/crawls"]
        jobs = [
            job
            for answer in answers
            if answer.url.path != "/crawls"
            for job in answer.json().get("items", [answer.json()])
        ]
        done = [await wait_for_status(client, job["id"], "succeeded", "dead") for job in jobs]
        crawled = [page for crawl in crawls for page in await pages_once_ended(client, crawl)]
    assert ["succeeded"] * len(jobs) == [job["status"] for job in done]
    assert crawled
    assert ["succeeded"] * len(crawled) == [page["status"] for page in crawled]
    assert len(jobs) == sum(web.count(path) for path in {urlsplit(job["url"]).path for job in jobs})
