"""Benchmarks of the queue, its fetch path and its extraction, against a local HTTP target.

bench/README.md says which bench answers which question, the command for each and how to
compare two commits; docs/benchmarks.md holds today's figures, docs/design/benchmarks-*.md
how they came about. Nothing here is imported by `app`.
"""
