"""ingest: a REST service that fetches URLs reliably and keeps every job's state visible.

A job's life, and where each step lives (each told in full in docs/architecture.md):

1. submitted `pending`: api/routes/jobs.py -> store/jobs/ `JobStore.submit`;
2. claimed under a lease: worker/job_worker.py `Worker.tick` -> store/claim.py;
3. fetched through the SSRF guard and extracted: fetch/, content/ (robots.txt: rules/robots.py);
4. settled, its transition named once: rules/policy.py `settle` (`expired` for a lost lease);
5. recorded in batches, fenced on the lease: worker/completer.py -> store/record.py;
6. requeued by an operator once dead (`POST /jobs/{id}/retry`); its callback: worker/webhooks.py.

Values that cross modules are in model.py; SQLite and PostgreSQL differ only in store/backends/
(postgres/, sqlite/: the same statement names in each). runtime.py builds the running system,
and each part its own frozen view of the settings (part_settings.py).
"""

__version__ = "0.1.0"
