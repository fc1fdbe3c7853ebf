"""Settings, read from ``LEASEQ_*`` environment variables; every default is named once here.

The limits of the wire are not settings: they live in ``leaseq.limits``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from leaseq.limits import DEFAULT_MAX_BODY_BYTES, MAX_TTL_S

DEFAULT_LEASE_TTL_S = 300.0
DEFAULT_MAX_ATTEMPTS = 5
DEFAULT_MAX_PAYLOAD_BYTES = 256 * 1024
DEFAULT_IDEMPOTENCY_TTL_S = 24 * 3600.0

# How long, and how much, an HTTP client may keep the service waiting on it
# (``app.api.http_connections``; the head and body timeouts are settings below).
FIRST_REQUEST_S = 10.0  # from connecting to the first byte of the first request
MAX_HEAD_BYTES = 64 * 1024  # a request line and its headers; a larger head gets 431
LINGER_S = 2.0  # after a last answer (408, 431), the client's late bytes are dropped this long


def default_data_dir() -> Path:
    """Where the embedded PostgreSQL keeps its data when ``LEASEQ_DATA_DIR`` is unset."""
    return Path(platformdirs.user_data_dir("leaseq")) / "pgdata"


class Settings(BaseSettings):
    """Everything leaseq can be told from outside, with its default."""

    model_config = SettingsConfigDict(env_prefix="LEASEQ_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="PostgreSQL URL; unset means an embedded PostgreSQL in data_dir."
    )
    listen_database_url: str | None = Field(
        default=None,
        description="A direct connection for LISTEN when database_url goes through a pooler.",
    )
    database_pooled: bool | None = Field(
        default=None,
        description=(
            "database_url goes through a transaction-mode pooler (PgBouncer): no session state "
            "on it (no startup options, no LISTEN) and no prepared statements unless "
            "database_prepared_statements says otherwise. Unset: pooled when "
            "listen_database_url is set (a direct URL besides database_url means a pooler)."
        ),
    )
    database_prepared_statements: bool | None = Field(
        default=None,
        description=(
            "Let psycopg prepare statements it runs often; unset: on, except when "
            "database_pooled (a pooler in transaction mode without prepared-statement support)."
        ),
    )
    data_dir: Path = Field(default_factory=default_data_dir)
    lease_ttl_s: float = Field(default=DEFAULT_LEASE_TTL_S, gt=0, le=MAX_TTL_S)
    api_tokens: str = Field(
        default="", description="Comma-separated bearer tokens; empty means no auth."
    )
    token_recheck_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description=(
            "Seconds a process trusts a scoped token it checked before reading it again: the "
            "longest a revocation whose NOTIFY was lost takes to bind (docs/security.md)."
        ),
    )
    allowed_hosts: str = Field(
        default="",
        description=(
            "Comma-separated Host names served without API tokens besides loopback ones "
            "(DNS rebinding); `*` serves any. Ignored when API tokens are set."
        ),
    )
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    workers: int = Field(default=1, ge=1)
    ledger: bool = Field(
        default=True, description="Write lead_events rows; off trades the audit log for speed."
    )
    group_commit: bool = Field(
        default=True,
        description=(
            "Renewals, completions and leases of one session that arrive while a statement of "
            "their kind runs go together as the next one (one statement for many requests)."
        ),
    )
    tracing: bool = Field(
        default=False,
        description=(
            "Start an OpenTelemetry server span per request, a child of its traceparent header "
            "(FastAPI's own hooks; the spans go to the process's tracer provider)."
        ),
    )
    sweep_interval_s: float = Field(default=5.0, gt=0)
    pool_size: int = Field(default=10, ge=1)
    pool_timeout_s: float = Field(default=5.0, gt=0)
    statement_timeout_ms: int = Field(default=10_000, ge=0)
    connect_timeout_s: int = Field(default=5, ge=1)
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024)
    head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds a request head (request line and headers) may take to arrive, from its "
            "first byte; a slower one gets 408 and its connection is closed."
        ),
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds a request body may take to arrive, from the end of its head; a slower one "
            "gets 408, the request is not run, and its connection is closed."
        ),
    )
    max_waiters: int = Field(
        default=1000, ge=0, description="Long-poll lease requests held at once per process."
    )
    max_outcome_waiters: int = Field(
        default=1000,
        ge=0,
        description="Requests waiting for a lead's outcome (GET /leads/{id}?wait_s) per process.",
    )
    poll_interval_s: float = Field(
        default=1.5,
        gt=0,
        description=(
            "A waiting lease re-tries, and a request waiting for an outcome looks again, this "
            "often even without NOTIFY."
        ),
    )
    max_payload_bytes: int = Field(
        default=DEFAULT_MAX_PAYLOAD_BYTES,
        ge=1,
        description="Largest payload of a lead, and result of a completion, as compact JSON.",
    )
    prune_after_s: float | None = Field(
        default=None,
        gt=0,
        description="Delete terminal leads unchanged this long (background pruner); unset: keep.",
    )
    prune_interval_s: float = Field(
        default=60.0, gt=0, description="Seconds between runs of the background pruner."
    )
    idempotency_ttl_s: float = Field(
        default=DEFAULT_IDEMPOTENCY_TTL_S,
        gt=0,
        description=(
            "Seconds an Idempotency-Key of a push or lease is remembered at least (the "
            "background pruner forgets older ones)."
        ),
    )

    max_queued: int | None = Field(
        default=None,
        ge=1,
        description=(
            "The max_queued of sessions without their own: a push that would leave more of a "
            "session's leads queued answers 429 quota_exceeded (docs/beyond.md#backpressure); "
            "unset: no bound. Kept in the database as the service starts, so leaseq_push obeys "
            "it too."
        ),
    )
    quota_retry_after_s: int = Field(
        default=5,
        ge=1,
        le=3600,
        description="The Retry-After, in seconds, of a push refused for max_queued.",
    )

    fair_by: Literal["count", "time"] = Field(
        default="count",
        description=(
            "How a lease across sessions shares the workers by weight: by the number of "
            "leases (count), or by the time they last, from lease to end on the database "
            "clock (time: docs/beyond.md#fair-share-by-time)."
        ),
    )
    fence_keys: str = Field(
        default="",
        description=(
            "Comma-separated keys of the leases' fences (HMAC-SHA256): the first signs, every "
            "one verifies (a rotation lists the new key first and keeps the old one until its "
            "last lease has expired). Unset: a key the service makes once and keeps in the "
            "database (docs/beyond.md#fences)."
        ),
    )

    @field_validator("database_url", "listen_database_url")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value or None

    @property
    def pooled(self) -> bool:
        """Whether ``database_url`` is taken to go through a transaction-mode pooler."""
        if self.database_pooled is not None:
            return self.database_pooled
        return self.listen_database_url is not None

    @property
    def prepared_statements(self) -> bool:
        """Whether psycopg may prepare statements on ``database_url``."""
        if self.database_prepared_statements is not None:
            return self.database_prepared_statements
        return not self.pooled

    @property
    def listen_url(self) -> str | None:
        """Where the listener LISTENs: the direct URL when set, else ``database_url`` unless
        that goes through a pooler. None: no LISTEN, waiting leases poll every
        ``poll_interval_s``."""
        if self.listen_database_url is not None:
            return self.listen_database_url
        return None if self.pooled else self.database_url

    @property
    def allowed_host_list(self) -> list[str]:
        """The configured Host names (lower case), blanks dropped."""
        return [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]

    @property
    def fence_key_list(self) -> list[str]:
        """The configured fence keys, the signing one first, blanks dropped."""
        return [k.strip() for k in self.fence_keys.split(",") if k.strip()]

    @property
    def token_list(self) -> list[str]:
        """The configured API tokens, blanks dropped."""
        return [t.strip() for t in self.api_tokens.split(",") if t.strip()]
