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
        default=None,
        description=(
            "PostgreSQL URL (`postgresql://…`). Unset: an embedded PostgreSQL in "
            "`LEASEQ_DATA_DIR`, started and stopped with the service."
        ),
    )
    listen_database_url: str | None = Field(
        default=None,
        description=(
            "A direct connection for `LISTEN` when `LEASEQ_DATABASE_URL` goes through a "
            "pooler such as PgBouncer in transaction mode (and for `serve --migrate` then). "
            "See PgBouncer (docs/guides/pgbouncer.md#pgbouncer)."
        ),
    )
    database_pooled: bool | None = Field(
        default=None,
        description=(
            "`LEASEQ_DATABASE_URL` goes through a transaction-mode pooler: no session state "
            "on it (no startup options, so `LEASEQ_STATEMENT_TIMEOUT_MS` does not apply; no "
            "`LISTEN`, which then needs `LEASEQ_LISTEN_DATABASE_URL` or falls back to the "
            "slow poll) and no prepared statements. A pooler nobody mentioned never costs a "
            "5xx: when it refuses the startup options or loses a prepared statement, the "
            "service turns both off for its pool, retries, and logs one warning. Unset: "
            "`true` when `LEASEQ_LISTEN_DATABASE_URL` is set, else `false`."
        ),
    )
    database_prepared_statements: bool | None = Field(
        default=None,
        description=(
            "Let psycopg prepare statements it runs often. `true` behind a pooler that tracks"
            " them (PgBouncer 1.21+ with `max_prepared_statements`), never behind one that "
            "does not: there a server connection may hold another client's statement under "
            "the same name. The service turns them off at the first sign of that (a lost, "
            "doubled or mismatched prepared statement), but a statement of the very same "
            "shape would not show it. Unset: on, off when pooled."
        ),
    )
    data_dir: Path = Field(
        default_factory=default_data_dir,
        description=(
            "Where the embedded PostgreSQL keeps its data. Unset: the user data folder + "
            "`leaseq/pgdata` (Linux: `~/.local/share/leaseq/pgdata`)."
        ),
    )
    lease_ttl_s: float = Field(
        default=DEFAULT_LEASE_TTL_S,
        gt=0,
        le=MAX_TTL_S,
        description="Lease seconds when a worker asks for none (up to 3600).",
    )
    api_tokens: str = Field(
        default="",
        description=(
            "Comma-separated bearer tokens with full access; when set, every endpoint but "
            "`/healthz` and `/readyz` wants `Authorization: Bearer <token>`, one of these or "
            "a scoped token (see Who may do what "
            "(docs/guides/tokens.md#who-may-do-what-scoped-tokens)). Empty: no auth."
        ),
    )
    token_recheck_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description=(
            "Seconds a process trusts a scoped token it checked before reading it again: the "
            "longest a revocation whose `NOTIFY` it missed takes to bind there (up to 60)."
        ),
    )
    allowed_hosts: str = Field(
        default="",
        description=(
            "Without API tokens, the `Host` names served besides loopback ones (`localhost`, "
            "`127.0.0.1`, `[::1]`, any port), comma-separated; `*` serves any. Others get 403"
            " `forbidden`, so a web page cannot reach the service by DNS rebinding. Also "
            "`leaseq serve --allowed-hosts`."
        ),
    )
    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=8000, ge=0, le=65535, description="Port to listen on.")
    workers: int = Field(default=1, ge=1, description="Server processes.")
    ledger: bool = Field(
        default=True, description="Write the `lead_events` audit log; `false` trades it for speed."
    )
    group_commit: bool = Field(
        default=True,
        description=(
            "Group commit: renewals, completions and leases of one session that arrive while "
            "a statement of their kind runs in the process wait for it, then go together as "
            "one statement; each request still gets its own answer. A request that finds "
            "nothing of its kind running goes at once. `false` (`leaseq serve "
            "--no-group-commit`) sends one statement per request. See "
            "docs/design.md#group-commit."
        ),
    )
    tracing: bool = Field(
        default=False,
        description=(
            "The service's own OpenTelemetry spans: `true` (or `on`; `leaseq serve "
            "--tracing`) starts a server span per request, named after its route (`POST "
            "/lease`), a child of the request's `traceparent` header; a lease's span links to"
            " its leads' traces. They go to the tracer provider the process has set up "
            "(`opentelemetry-instrument leaseq serve`, or `FASTAPI_OTEL_AUTO_CONFIGURE=true` "
            "with `OTEL_EXPORTER_OTLP_ENDPOINT` and `opentelemetry-sdk` plus "
            "`opentelemetry-exporter-otlp-proto-http` installed). `false`: none, whatever "
            "provider is set up. See Trace context (docs/guides/tracing.md#trace-context)."
        ),
    )
    sweep_interval_s: float = Field(
        default=5.0, gt=0, description="Seconds between background sweeps of expired leases."
    )
    pool_size: int = Field(default=10, ge=1, description="Database connections per server process.")
    pool_timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Seconds to wait for a free connection before answering 503 `unavailable`.",
    )
    statement_timeout_ms: int = Field(
        default=10_000,
        ge=0,
        description="PostgreSQL `statement_timeout` of every connection (0: none).",
    )
    connect_timeout_s: int = Field(
        default=5, ge=1, description="Seconds to wait for a new database connection."
    )
    max_body_bytes: int = Field(
        default=DEFAULT_MAX_BODY_BYTES,
        ge=1024,
        description="Largest request body; larger ones get 413 `payload_too_large`.",
    )
    head_timeout_s: float = Field(
        default=10.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds a request head (request line and headers) may take to arrive, from its "
            "first byte; a slower one gets 408 `unavailable` and its connection is closed. A "
            "head over 64 KiB gets 431 `payload_too_large`."
        ),
    )
    body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        allow_inf_nan=False,
        description=(
            "Seconds a request body may take to arrive after its head; a slower one gets 408 "
            "`unavailable`, the request is not run, and its connection is closed. When a "
            "process is full, a connection still sending its request after a second goes "
            "first (see docs/design.md#slow-and-hostile-clients-appapihttp_connectionspy)."
        ),
    )
    max_waiters: int = Field(
        default=1000, ge=0, description="Long-poll lease requests held at once per process."
    )
    max_outcome_waiters: int = Field(
        default=1000,
        ge=0,
        description=(
            "Requests waiting for a lead's outcome (`GET /leads/{id}?wait_s`) held at once "
            "per process."
        ),
    )
    poll_interval_s: float = Field(
        default=1.5,
        gt=0,
        description=(
            "A waiting lease retries, and a request waiting for an outcome looks again, this "
            "often even without a `NOTIFY`."
        ),
    )
    max_payload_bytes: int = Field(
        default=DEFAULT_MAX_PAYLOAD_BYTES,
        ge=1,
        description=(
            "Largest lead payload, and completion result, as compact JSON; larger ones get "
            "422 `validation_error`."
        ),
    )
    prune_after_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "Background pruner: delete done, failed and cached leads unchanged this many "
            "seconds (docs/guides/retention.md). Unset: keep them."
        ),
    )
    prune_interval_s: float = Field(
        default=60.0, gt=0, description="Seconds between runs of the background pruner."
    )
    idempotency_ttl_s: float = Field(
        default=DEFAULT_IDEMPOTENCY_TTL_S,
        gt=0,
        description=(
            "Seconds an `Idempotency-Key` of a push or lease is remembered at least; the "
            "background pruner forgets older ones."
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
