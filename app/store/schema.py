"""The schema: the Table definitions Alembic compares against, and the migrations' URL.

SQLAlchemy lives here and in the migrations only, synchronously: the service
reaches PostgreSQL through ``app.store.pool``, and the SQL it runs lives in
``app.store.statements``. The status list is the model's (``leaseq.model.STATUSES``).
Knows nothing of HTTP.
"""

from __future__ import annotations

from sqlalchemy import (
    DDL,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Double,
    Identity,
    Index,
    Integer,
    MetaData,
    PrimaryKeyConstraint,
    Table,
    Text,
    event,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import URL, make_url

from app.store.statements import OUTCOME_EVENTS, in_list
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

# A lead the lease may take now, as the partial indexes say it (revision 0004).
READY = "status = 'queued' AND NOT scheduled"

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
    # A queued lead whose available_at was in the future when it was queued (revision 0004):
    # kept out of leads_ready until promoted (app.store.statements: lease_next, promote).
    Column("scheduled", Boolean, nullable=False, server_default=text("false")),
    # What the holder's renewals last carried, handed to the next holder (revision 0005).
    Column("checkpoint", JSONB, nullable=True),
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
    CheckConstraint("NOT scheduled OR status = 'queued'", name="leads_scheduled_queued"),
    Index(
        "leads_session_key", "session", "key", unique=True, postgresql_where=text("key IS NOT NULL")
    ),
    # The lease query's index: equality on session, then its ORDER BY, over ready leads
    # only, so a lease never walks over delayed ones (revision 0004).
    Index(
        "leads_ready",
        "session",
        text("priority DESC"),
        "id",
        postgresql_where=text(READY),
    ),
    # The oldest ready lead of a session (the dashboard), one probe per session.
    Index("leads_ready_age", "session", "available_at", postgresql_where=text(READY)),
    # Due scheduled leads: of one session (the lease), of all (the sweeper's promotion).
    Index("leads_scheduled_due", "session", "available_at", postgresql_where=text("scheduled")),
    Index("leads_scheduled_at", "available_at", postgresql_where=text("scheduled")),
    # The dashboard's latest failures, read in the order they are shown.
    Index(
        "leads_failed_recent",
        text("updated_at DESC"),
        text("id DESC"),
        postgresql_where=text("status = 'failed'"),
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


# A session's weight in a lease across sessions, its cap and its token bucket (revision 0005).
# A session without a row has the defaults (weight 1, no limits); see app.leasing.fleet.
session_settings = Table(
    "session_settings",
    metadata,
    Column("session", Text, nullable=False),
    Column("weight", Double, nullable=False, server_default=text("1")),
    Column("max_leased", Integer, nullable=True),
    Column("rate_per_s", Double, nullable=True),
    Column("burst", Integer, nullable=True),
    # The bucket: its level at refilled_at (database clock); NULL until first drawn from.
    Column("tokens", Double, nullable=True),
    Column("refilled_at", DateTime(timezone=True), nullable=True),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="session_settings_session_valid"),
    CheckConstraint("weight > 0", name="session_settings_weight_positive"),
    CheckConstraint("max_leased >= 0", name="session_settings_max_leased_nonnegative"),
    CheckConstraint("rate_per_s > 0", name="session_settings_rate_positive"),
    CheckConstraint(
        "burst IS NULL OR (burst >= 1 AND rate_per_s IS NOT NULL)",
        name="session_settings_burst_with_rate",
    ),
    PrimaryKeyConstraint("session", name="session_settings_pkey"),
)


# Leads per session and status, kept by statement-level triggers on leads in slots per
# backend (revision 0004): the sum over slots is the count. See the migration.
lead_counts = Table(
    "lead_counts",
    metadata,
    Column("session", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("slot", Integer, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("session", "status", "slot", name="lead_counts_pkey"),
)


# The triggers that keep lead_counts (revision 0004): each backend writes its own slot.
COUNT_SLOTS = 64

COUNT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_count_leads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One upsert per (session, status) the statement changed, in a fixed order (no deadlock
    -- between two statements of one slot), into this backend's slot.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, count(*)
        FROM new_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, -count(*)
        FROM old_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM lead_counts;
    ELSE
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, sum(d)
        FROM (SELECT session, status, 1 AS d FROM new_rows
              UNION ALL SELECT session, status, -1 FROM old_rows) AS changes
        GROUP BY session, status HAVING sum(d) <> 0 ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$
"""

TRIGGERS = {
    "leads_count_insert": "AFTER INSERT ON leads REFERENCING NEW TABLE AS new_rows",
    "leads_count_update": (
        "AFTER UPDATE ON leads REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
    ),
    "leads_count_delete": "AFTER DELETE ON leads REFERENCING OLD TABLE AS old_rows",
    "leads_count_truncate": "AFTER TRUNCATE ON leads",
}


CREATE_TRIGGER = "CREATE TRIGGER {} {} FOR EACH STATEMENT EXECUTE FUNCTION leaseq_count_leads()"

# What metadata.create_all builds besides tables, as the migration does (tests compare both).
_function = DDL(COUNT_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]  # DDL formats %
event.listen(metadata, "before_create", _function)
for _name, _when in TRIGGERS.items():
    _trigger = DDL(CREATE_TRIGGER.format(_name, _when))  # type: ignore[no-untyped-call]
    event.listen(leads, "after_create", _trigger)


def sqlalchemy_url(url: str) -> URL:
    """The URL with the psycopg 3 driver, whatever scheme the user wrote (for Alembic)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed
