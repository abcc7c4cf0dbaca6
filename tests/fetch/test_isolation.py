"""No state crosses from one request to the next: the fetcher and the webhook sender keep
no cookies, whatever the servers set. End to end against a real server, on both backends."""

from tests.conftest import eventually, running_app, submit, wait_for_status
from tests.support.webserver import Reply, ScriptedServer

SET_COOKIE = {"Set-Cookie": "session=secret; Path=/"}


def cookies_sent(headers: list[dict[str, str]]) -> list[str]:
    return [value for request in headers for name, value in request.items() if name == "Cookie"]


async def test_a_cookie_set_for_one_tenant_is_not_sent_for_another(make_settings, web):
    """Tenant a's page sets a cookie; tenant b's later fetch of the same host sends none,
    and the fetcher's cookie jar stays empty."""
    first = web.script("/login", Reply(headers=SET_COOKIE))
    async with running_app(make_settings()) as (app, client):
        job = await submit(client, first, tenant="a")
        await wait_for_status(client, job["id"], "succeeded")
        job = await submit(client, web.url("/account"), tenant="b")
        await wait_for_status(client, job["id"], "succeeded")
        jar = [c for client in app.state.runtime.worker.fetcher.clients for c in client.cookies.jar]
    assert 1 == len(web.headers["/account"])
    assert [] == cookies_sent(web.headers["/account"])
    assert [] == jar


async def test_a_cookie_set_on_a_redirect_is_not_sent_on_the_next_hop(make_settings, web):
    """A 302 that sets a cookie: the hop it points to is fetched without it."""
    start = web.script("/hop", Reply(302, b"", headers={"Location": "/landing", **SET_COOKIE}))
    async with running_app(make_settings()) as (_, client):
        job = await submit(client, start)
        done = await wait_for_status(client, job["id"], "succeeded")
    assert web.url("/landing") == done["result"]["final_url"]
    assert 1 == len(web.headers["/landing"])
    assert [] == cookies_sent(web.headers["/landing"])


async def test_webhook_sender_keeps_no_cookies(make_settings, web: ScriptedServer):
    """A receiver that sets a cookie gets no Cookie header with the next callback; the
    sender's jar stays empty."""
    hook = web.script("/hook", Reply(headers=SET_COOKIE))
    async with running_app(make_settings()) as (app, client):
        for _ in range(2):
            job = await submit(client, web.url("/page"), callback_url=hook)
            await wait_for_status(client, job["id"], "succeeded")
            await _delivered(client, job["id"])
        jar = list(app.state.runtime.deliverer.client.cookies.jar)
    assert 2 == len(web.posts["/hook"])
    assert [] == cookies_sent([headers for headers, _ in web.posts["/hook"]])
    assert [] == jar


async def _delivered(client, job_id: str) -> None:
    async def check() -> bool:
        items = (await client.get(f"/jobs/{job_id}/deliveries")).json()["items"]
        return bool(items) and items[0]["status"] == "delivered"

    await eventually(check)
