"""Load, small: `bench.load` on each backend with a few thousand jobs. `ingest serve` takes
them through POST /jobs/batch while an `ingest worker` drains them from a local target:
no error answer, and every accepted job succeeded. No time is asserted (the machine is
shared); `make bench-load` runs the full size and prints the figures."""

import pytest

from bench.load import load, parser


@pytest.mark.slow
@pytest.mark.timeout(240)
async def test_batches_under_load_lose_nothing(database_url):
    args = parser().parse_args(["--jobs", "3000", "--batch", "500", "--timeout", "180"])
    result = await load(database_url, args)
    assert 0 == result["error_responses"]
    assert (3000, 0, 0) == (result["accepted"], result["lost"], result["dead_or_cancelled"])
