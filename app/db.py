"""The schema: the Table definitions Alembic compares against, and the migrations' URL.

SQLAlchemy lives here and in the migrations only, synchronously: the service
reaches PostgreSQL through ``app.pg``, and the SQL it runs lives in
``app.sql``. The status list is the model's (``leaseq.model.STATUSES``).
Knows nothing of HTTP.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Column,
    DateTime,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import URL, make_url

from app.sql import OUTCOME_EVENTS, in_list
from leaseq.limits import SESSION_PATTERN
from leaseq.model import FINAL_STATUSES, STATUSES

IDEMPOTENT_VERBS = ("push", "lease")
EVENTS = ("pushed", "leased", "released", "completed", "expired", "cancelled", "retried")

# Storage parameters for the leads table, which churns: every lead is updated
# three or more times. Free space in each page lets PostgreSQL keep updated
# versions on the same page; autovacuum runs after 1% of the rows died instead
# of 20%, so dead tuples never pile up in front of the lease query.
LEADS_STORAGE = {
    "fillfactor": "70",
    "autovacuum_vacuum_scale_factor": "0.01",
    "autovacuum_vacuum_threshold": "1000",
    "autovacuum_analyze_scale_factor": "0.02",
    "autovacuum_vacuum_cost_delay": "1",
}

# What each status says of the lease columns (revision 0003).
LEASE_STATE = (
    "CASE status WHEN 'leased' THEN lease_token IS NOT NULL AND lease_expires_at IS NOT NULL "
    "WHEN 'queued' THEN lease_token IS NULL AND lease_expires_at IS NULL "
    "ELSE lease_expires_at IS NULL END"
)

metadata = MetaData()


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN {in_list(values)}"


leads = Table(
    "leads",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("session", Text, nullable=False),
    Column("priority", Integer, nullable=False, server_default=text("0")),
    Column("payload", JSONB, nullable=False, server_default=text("'{}'::jsonb")),
    Column("key", Text, nullable=True),
    Column("depth", Integer, nullable=False, server_default=text("0")),
    Column("parent_id", BigInteger, nullable=True),
    Column("status", Text, nullable=False, server_default=text("'queued'")),
    Column("owner", Text, nullable=True),
    Column("lease_token", Text, nullable=True),
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False, server_default=text("5")),
    Column("available_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("result", JSONB, nullable=True),
    Column("error", Text, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    CheckConstraint(_in("status", STATUSES), name="leads_status_valid"),
    CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="leads_session_valid"),
    CheckConstraint("attempts >= 0", name="leads_attempts_nonnegative"),
    CheckConstraint("max_attempts >= 1", name="leads_max_attempts_positive"),
    CheckConstraint("depth >= 0", name="leads_depth_nonnegative"),
    CheckConstraint("jsonb_typeof(payload) = 'object'", name="leads_payload_object"),
    # A leased lead has a token and an expiry, and only a leased lead has an expiry. A
    # finished lead keeps the token of the lease that completed it (never shown), so a
    # completion retried with it is recognised (revision 0003); a queued lead has none.
    CheckConstraint(LEASE_STATE, name="leads_lease_state"),
    Index(
        "leads_session_key", "session", "key", unique=True, postgresql_where=text("key IS NOT NULL")
    ),
    # The lease query's index: equality on session, then its ORDER BY.
    Index(
        "leads_queued",
        "session",
        text("priority DESC"),
        "id",
        postgresql_where=text("status = 'queued'"),
    ),
    # The sweeper's index: expired leases, across sessions or in one.
    Index("leads_leased_expiry", "lease_expires_at", postgresql_where=text("status = 'leased'")),
    Index("leads_session_status", "session", "status"),
    # The pruner's index: terminal leads, oldest change first (revision 0002).
    Index(
        "leads_terminal_updated",
        "updated_at",
        postgresql_where=text(_in("status", FINAL_STATUSES)),
    ),
)

lead_events = Table(
    "lead_events",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("lead_id", BigInteger, nullable=False),
    Column("session", Text, nullable=False),
    Column("event", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("owner", Text, nullable=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(_in("event", EVENTS), name="lead_events_event_valid"),
    Index("lead_events_session_lead", "session", "lead_id", "id"),
    Index("lead_events_lead", "lead_id"),
    # The dashboard's throughput window: ends of attempts by time (revision 0002).
    Index(
        "lead_events_outcomes_at",
        "at",
        postgresql_where=text(_in("event", OUTCOME_EVENTS)),
    ),
)


# The answers of requests sent with an Idempotency-Key (push, lease), so a retry gets the
# first answer instead of a second effect; pruned after LEASEQ_IDEMPOTENCY_TTL_S (0003).
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("verb", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("request", Text, nullable=False),
    Column("answer", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("verb", "key", name="idempotency_keys_pkey"),
    CheckConstraint(_in("verb", IDEMPOTENT_VERBS), name="idempotency_keys_verb_valid"),
    Index("idempotency_keys_created", "created_at"),
)


def sqlalchemy_url(url: str) -> URL:
    """The URL with the psycopg 3 driver, whatever scheme the user wrote (for Alembic)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed
