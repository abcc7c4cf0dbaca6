"""Settings: every knob of the service, read from `INGEST_*` variables or `.env`.

Built once by the CLI or by `create_app` and passed down as a plain value; there is no
module-level instance, so tests build their own.
"""

from typing import Annotated

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_TRANSIENT_ERRORS = (
    "ConnectTimeout",
    "ReadTimeout",
    "WriteTimeout",
    "PoolTimeout",
    "ConnectError",
    "ReadError",
    "WriteError",
    "RemoteProtocolError",
    "FetchTimeout",
)


def parse_status_codes(value: str) -> frozenset[int]:
    """Parse `"408,500-599"` into the set of codes it names."""
    codes: set[int] = set()
    for part in value.split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if not 100 <= first <= last <= 599:
            raise ValueError(f"bad HTTP status range {part!r}")
        codes.update(range(first, last + 1))
    return frozenset(codes)


def _split_names(value: object) -> object:
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    return value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="INGEST_", env_file=".env", extra="ignore", frozen=True
    )

    # Storage
    database_url: str = Field(
        "sqlite:///data/ingest.db",
        description="sqlite:///path/to.db or postgresql://user@host/db; driver chosen for you.",
    )

    # HTTP API
    host: str = Field("127.0.0.1", description="Address `ingest serve` listens on.")
    port: int = Field(8000, ge=1, le=65535, description="Port `ingest serve` listens on.")

    # Worker
    worker_enabled: bool = Field(True, description="Run the worker inside `ingest serve`.")
    worker_concurrency: int = Field(32, ge=1, le=1000, description="In-flight fetches per process.")
    poll_interval_seconds: float = Field(
        2.0, gt=0, description="Longest idle wait before the worker looks for due jobs again."
    )
    lease_seconds: float = Field(
        60.0, gt=0, description="A running job whose lease is this old is taken back."
    )
    shutdown_grace_seconds: float = Field(
        10.0, ge=0, description="Time in-flight fetches get to finish on shutdown."
    )

    # Retry policy
    max_attempts: int = Field(4, ge=1, le=100, description="Default attempt budget of a job.")
    backoff_base_seconds: float = Field(30.0, gt=0, description="Delay after the first failure.")
    backoff_max_seconds: float = Field(300.0, gt=0, description="Cap of the delay before jitter.")
    backoff_jitter: float = Field(
        0.2, ge=0, lt=1, description="Delay is multiplied by a uniform factor in [1-j, 1+j]."
    )
    transient_errors: Annotated[tuple[str, ...], NoDecode] = Field(
        DEFAULT_TRANSIENT_ERRORS,
        description="Comma-separated exception names that are retried.",
    )
    transient_status_codes: Annotated[frozenset[int], NoDecode] = Field(
        parse_status_codes("408,500-599"),
        description="HTTP statuses that are retried, e.g. 408,500-599.",
    )

    # Rate limits
    retry_after_max_seconds: float = Field(
        3600.0, gt=0, description="Longest Retry-After honoured; longer requests are capped."
    )
    max_deferrals: int = Field(
        20, ge=0, description="Rate-limited answers a job may get before it is dead (rate_limited)."
    )

    # Fetching
    connect_timeout_seconds: float = Field(10.0, gt=0, description="TCP/TLS connect timeout.")
    read_timeout_seconds: float = Field(20.0, gt=0, description="Longest wait for one read.")
    fetch_timeout_seconds: float = Field(
        30.0, gt=0, description="Deadline for the whole fetch, redirects and body included."
    )
    max_redirects: int = Field(5, ge=0, le=30, description="Redirects followed per fetch.")
    max_body_bytes: int = Field(
        10 * 1024 * 1024, ge=1, description="Larger decoded bodies make the job dead (fatal)."
    )
    user_agent: str = Field("ingest/0.1", description="User-Agent header of every fetch.")

    # Logs
    log_level: str = Field("INFO", description="Python logging level name.")

    @field_validator("transient_errors", mode="before")
    @classmethod
    def _names(cls, value: object) -> object:
        return _split_names(value)

    @field_validator("transient_status_codes", mode="before")
    @classmethod
    def _codes(cls, value: object) -> object:
        return parse_status_codes(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _consistent(self) -> "Settings":
        if self.backoff_max_seconds < self.backoff_base_seconds:
            raise ValueError("backoff_max_seconds must be >= backoff_base_seconds")
        if self.fetch_timeout_seconds < self.connect_timeout_seconds:
            raise ValueError("fetch_timeout_seconds must be >= connect_timeout_seconds")
        return self
