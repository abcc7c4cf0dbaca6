"""Peak RSS of one process making 32 concurrent fetches of large bodies (README, Limits).

    .venv/bin/python -m bench.fetch_memory oversize   # endless bodies, all BodyTooLarge
    .venv/bin/python -m bench.fetch_memory ordinary   # 9 MiB HTML pages of long paragraphs
    .venv/bin/python -m bench.fetch_memory dense      # 9 MiB HTML of tiny elements

Default settings (10 MiB cap), the fetcher alone (no database), servers on 127.0.0.1.
"""

import argparse
import asyncio
import time

from app.fetch.fetcher import Fetcher
from app.part_settings import PartSettings, destinations_of
from app.settings import Settings
from tests.fetch.test_hostile import MiB, PeakRSS
from tests.support.hostile import HostileServer
from tests.support.webserver import Reply, ScriptedServer

PAGES = {
    "ordinary": b"<html><body>"
    + (b"<p>" + b"word " * 400 + b"</p>\n") * (9 * MiB // 2008)
    + b"</body></html>",
    "dense": b"<html><body>" + b"<p>word <b>word</b></p>" * (9 * MiB // 23) + b"</body></html>",
}


async def measure(kind: str, concurrency: int) -> None:
    settings = Settings(_env_file=None, allowed_hosts="127.0.0.1", worker_concurrency=concurrency)
    fetcher = Fetcher(PartSettings.of(settings).fetch, destinations=destinations_of(settings))

    async def one(url: str) -> str:
        return type(await fetcher.fetch(url)).__name__  # dropped at once, as the worker does

    with HostileServer() as hostile, ScriptedServer() as web:
        url = (
            hostile.url("/endless")
            if kind == "oversize"
            else web.script("/big", Reply(200, PAGES[kind]))
        )
        with PeakRSS() as rss:
            started = time.monotonic()
            outcomes = await asyncio.gather(*(one(url) for _ in range(concurrency)))
            elapsed = time.monotonic() - started
    await fetcher.aclose()
    print(
        f"{kind}: {concurrency} concurrent, outcomes {sorted(set(outcomes))}: "
        f"RSS +{rss.growth / MiB:.0f} MiB (peak {rss.peak / MiB:.0f} MiB) in {elapsed:.1f}s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["oversize", "ordinary", "dense"])
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    asyncio.run(measure(args.kind, args.concurrency))


if __name__ == "__main__":
    main()
