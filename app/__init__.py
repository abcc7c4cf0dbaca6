"""ingest: a REST service that fetches URLs reliably and keeps every job's state visible.

A job's life, and where each step lives:

1. `POST /jobs` stores it `pending` (api/routes/jobs.py -> store/jobs.py `JobStore.submit`).
2. A worker's tick claims due jobs: `running`, attempt counted, leased under a random
   `lease_id` (worker/job_worker.py `Worker.tick` -> store/claim.py, where a job is claimed).
3. The fetcher GETs the URL through the SSRF guard (fetch/guard.py) within limits
   (fetch/fetcher.py), and extracts its text (content/, in the extraction processes of
   fetch/pool.py): a `Fetched` or a `Failure`. With INGEST_ROBOTS_TXT=obey, the origin's
   robots.txt is asked first (fetch/robots_reader.py, its rules in rules/robots.py).
4. Policy settles it (rules/policy.py `settle`, the backoff formula in `backoff_delay`): complete,
   pending again with a `retry_after`, or dead; and names the transition once
   (model.py `Transition`), which the store, logs, metrics and pauses read as it is.
5. The completer (worker/completer.py) records outcomes in batches, and the store writes each as
   given, fenced on the lease (store/record.py); a success stores the body and text, and a
   finished job's callback is owed, in that transaction. Then, from the failures recorded,
   policy says whether a domain should pause (rules/policy.py `domain_pause`).
6. A lease that expires (its worker died) is taken back the same way (rules/policy.py `expired`).
7. Operators list dead jobs and requeue them (`POST /jobs/{id}/retry`).
8. A job with a `callback_url` gets a signed POST (worker/webhooks.py, store/deliveries.py).

Values that cross modules are in model.py; SQLite and PostgreSQL differ only in
store/backends/ (one module per backend) and the shared SQL helpers of store/dialect.py;
runtime.py builds the running system for `ingest serve` and `ingest worker`. Settings stop
there: runtime.py makes each part's frozen view of them once (part_settings.py: the retry rules,
the claim's share rules, the fetch limits, ...) and hands each part its own.
"""

__version__ = "0.1.0"
