"""`python -m app` is the `ingest` command."""

from app.cli import main

main()
