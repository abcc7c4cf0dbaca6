"""GETs of the small documents read beside jobs' pages (robots.txt, a crawl's listings),
through the fetcher's guarded clients: its SSRF guard, timeouts and User-Agent, redirects
followed up to a bound, the whole read under the fetch deadline. Never raises for a failure
of the remote side: it is the classified `Failure` a job's fetch would get."""

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import httpx

from app.fetch.fetcher import Fetcher, FetchTimeout, InvalidRedirect
from app.fetch.guard import BlockedDestination
from app.model import ErrorKind, Failure
from app.rules.policy import classify_exception

T = TypeVar("T")


async def read_small(
    fetcher: Fetcher,
    url: str,
    answer: Callable[[httpx.Response], Awaitable[T]],
    max_redirects: int,
) -> T | Failure | None:
    """What `answer` makes of the final answer to a GET of `url` (streamed: it reads what it
    needs of the body); None past `max_redirects` redirects; the failure otherwise."""
    limits = fetcher.limits
    try:
        async with asyncio.timeout(limits.fetch_timeout_seconds):
            with fetcher.client() as client:
                request = client.build_request("GET", url)
                for _ in range(max_redirects + 1):
                    response = await client.send(request, stream=True)
                    try:
                        if response.next_request is None:
                            return await answer(response)
                        request = response.next_request
                    finally:
                        await response.aclose()  # a 3xx body is never read
        return None
    except TimeoutError:
        timeout = FetchTimeout(f"no complete answer within {limits.fetch_timeout_seconds:g}s")
        return classify_exception(timeout, limits.transient_errors)
    except BlockedDestination as exc:
        return Failure(ErrorKind.FATAL, "BlockedDestination", str(exc))
    except InvalidRedirect as exc:
        return Failure(ErrorKind.FATAL, "InvalidRedirect", str(exc))
    except Exception as exc:  # every failure becomes a classified outcome
        return classify_exception(exc, limits.transient_errors)
