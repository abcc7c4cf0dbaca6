"""ingest: a REST service that fetches URLs reliably and keeps every job's state visible.

A job's life:

1. `POST /jobs` stores it `pending` (api/jobs.py -> store/jobs.py `JobStore.submit`).
2. A worker claims due jobs: `running`, attempt counted, leased (store/queue.py `Queue.claim`).
3. The fetcher GETs the URL through the SSRF guard (guard.py) within limits (fetcher.py),
   extracts its text (content.py) and returns a result or a `Failure`.
4. Policy decides (policy.py `decide`): succeeded, pending again with `retry_after`, or dead.
5. The queue records it, guarded by the lease (store/queue.py `record_success/failure`);
   a success stores the body and text in the same transaction (store/contents.py).
6. A lease that expires (the worker died) is taken back (`Queue.reclaim_expired`).
7. Operators list dead jobs and requeue them (`POST /jobs/{id}/retry`).
8. A job with a `callback_url` is owed a signed POST with its last transition; the sender
   (webhooks.py) claims and retries those deliveries like jobs (store/deliveries.py).
"""

__version__ = "0.1.0"
