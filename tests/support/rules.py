"""The retry rules the unit tests decide with: INGEST_BACKOFF_* and the other retry settings
at their defaults, without jitter, so a delay is exact. A test that depends on one number
says so with `dataclasses.replace`."""

from app.rules.policy import RetryRules

RETRY = RetryRules(
    backoff_base_seconds=30.0,
    backoff_max_seconds=300.0,
    backoff_jitter=0.0,
    max_deferrals=20,
    retry_after_max_seconds=3600.0,
    domain_failure_threshold=3,
)
