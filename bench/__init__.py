"""Benchmarks of the queue and its fetch path, against a local HTTP target.

- `python -m bench.drain`: drain rate, worker CPU per job and pickup latency, per backend,
  and with `--scenarios` every other figure of docs/benchmarks.md in the same interleaved rounds
  (many hosts, a slow target, `ingest serve`, claim cost, memory, start-up).
- `python -m bench.fair_claim`: claim cost with many tenants and domains.
- `python -m bench.claim`: cost of a claim (and of listing) as terminal rows pile up.
- `python -m bench.extraction`: main-text extraction, quality and ms per page, of ingest
  (this and other checkouts), trafilatura and others on trafilatura's eval set.
- `python -m bench.pages`: one worker draining those pages against the extractor alone on
  every core.
- `python -m bench.target`: the HTTP target they use (started for you in its own process).

See docs/benchmarks.md for the machine, the commands and the numbers.
"""
