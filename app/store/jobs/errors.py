"""What the store refuses an operator's verb or read with; the API maps each to a problem.

Values only: raised by `app.store.jobs` (and the cursor codec), mapped to HTTP responses in
`app.api.problems`, to messages in `app.cli.runner`.
"""


class JobNotFound(LookupError):
    pass


class AmbiguousId(LookupError):
    """More than one job's id starts with the prefix given."""


class StateConflict(Exception):
    """The job is not in a state that allows the operation."""

    def __init__(self, job_id: str, status: str, operation: str) -> None:
        super().__init__(f"job {job_id} is {status}; cannot {operation}")
        self.status = status


class IdempotencyConflict(Exception):
    """The idempotency key was used before with another request body."""


class BadCursor(ValueError):
    pass
