"""Benchmarks of the queue and its fetch path, against a local HTTP target.

- `python -m bench.drain`: drain rate, worker CPU per job and pickup latency, per backend.
- `python -m bench.claim`: cost of a claim (and of listing) as terminal rows pile up.
- `python -m bench.target`: the HTTP target both use (started for you in its own process).

See BENCHMARKS.md for the machine, the commands and the numbers.
"""
