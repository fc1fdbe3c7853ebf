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
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.engine import URL, make_url

from app.config import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES
from app.store.statements import NOTIFY_CHANNEL, OUTCOME_EVENTS, in_list
from app.store.statements.dependencies import DEPENDENTS_FUNCTION, DEPENDENTS_TRIGGER
from app.store.statements.fences import FENCE_FUNCTION, HMAC_FUNCTION
from app.store.statements.outcomes import ENDED_FUNCTION, ENDED_TRIGGER
from app.store.statements.parking import FREES_FUNCTION, FREES_TRIGGER, PARKED
from app.store.statements.quota import MAX_QUEUED_FUNCTION, MAX_QUEUED_TRIGGER
from leaseq.limits import (
    MAX_ATTEMPTS,
    MAX_CONCURRENCY_KEY_CHARS,
    MAX_DELAY_S,
    MAX_INTEGER_DIGITS,
    MAX_JSON_DEPTH,
    MAX_KEY_CHARS,
    MAX_RUNTIME_S,
    SESSION_PATTERN,
    SESSION_SCOPE_PATTERN,
    TOKEN_NAME_PATTERN,
    TOKEN_ROLES,
    TRACEPARENT_PATTERN,
)
from leaseq.model import FINAL_STATUSES, STATUSES

IDEMPOTENT_VERBS = ("push", "lease")
# The ledger's events (revision 0013 added ``failed``: a lead failed because a lead it waits on
# did, the one event no lease, worker or operator caused).
EVENTS = (
    "pushed",
    "leased",
    "released",
    "completed",
    "expired",
    "cancelled",
    "retried",
    "failed",
)

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
    # Flow control (revision 0009): leases ended by a throttled release (not counted against
    # max_attempts), the key of the per-key cap, the maximum runtime and where the current
    # attempt's ends (no renewal past it).
    Column("throttles", Integer, nullable=False, server_default=text("0")),
    Column("concurrency_key", Text, nullable=True),
    Column("max_runtime_s", Integer, nullable=True),
    Column("runtime_ends_at", DateTime(timezone=True), nullable=True),
    # The W3C traceparent the lead was pushed with (revision 0011), handed to its workers.
    Column("traceparent", Text, nullable=True),
    # Dependencies (revision 0012; app.store.statements.dependencies): the ids it waits on,
    # how many of them are not yet done or cached (above 0: blocked, scheduled at
    # BLOCKED_UNTIL), whether any lead waits on it (the trigger's WHEN), and the time it was
    # pushed for, kept while it is blocked.
    Column("after", ARRAY(BigInteger), nullable=False, server_default=text("'{}'")),
    Column("waiting_on", Integer, nullable=False, server_default=text("0")),
    Column("has_dependents", Boolean, nullable=False, server_default=text("false")),
    Column("ready_at", DateTime(timezone=True), nullable=True),
    # The event a statement names for the ledger's row trigger on a Citus cluster (revision
    # 0016); NULL at rest: the trigger nulls it again, and on one PostgreSQL it stays NULL.
    Column("ledger_event", Text, nullable=True),
    # Parked because its concurrency key was at its cap (revision 0018; PARKED in
    # app.store.statements.parking): brought back when the key frees room.
    Column("parked", Boolean, nullable=False, server_default=text("false")),
    CheckConstraint(_in("status", STATUSES), name="leads_status_valid"),
    CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="leads_session_valid"),
    CheckConstraint("attempts >= 0", name="leads_attempts_nonnegative"),
    CheckConstraint("max_attempts >= 1", name="leads_max_attempts_positive"),
    CheckConstraint("depth >= 0", name="leads_depth_nonnegative"),
    CheckConstraint("jsonb_typeof(payload) = 'object'", name="leads_payload_object"),
    # Only what the API can give back, whichever door wrote it (revision 0020).
    CheckConstraint("leaseq_json_fault(payload) IS NULL", name="leads_payload_readable"),
    # A leased lead has a token and an expiry, and only a leased lead has an expiry. A
    # finished lead keeps the token of the lease that completed it (never shown), so a
    # completion retried with it is recognised (revision 0003); a queued lead has none.
    CheckConstraint(LEASE_STATE, name="leads_lease_state"),
    CheckConstraint("NOT scheduled OR status = 'queued'", name="leads_scheduled_queued"),
    CheckConstraint("throttles >= 0 AND throttles <= attempts", name="leads_throttles_valid"),
    CheckConstraint(
        f"char_length(concurrency_key) BETWEEN 1 AND {MAX_CONCURRENCY_KEY_CHARS}",
        name="leads_concurrency_key_valid",
    ),
    CheckConstraint(f"max_runtime_s BETWEEN 1 AND {MAX_RUNTIME_S}", name="leads_max_runtime_valid"),
    CheckConstraint(f"traceparent ~ '{TRACEPARENT_PATTERN}'", name="leads_traceparent_valid"),
    CheckConstraint(
        "waiting_on >= 0 AND (waiting_on = 0 OR scheduled)", name="leads_waiting_on_valid"
    ),
    CheckConstraint("NOT parked OR (status = 'queued' AND scheduled)", name="leads_parked_queued"),
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
    # Blocked leads per session, for the stats' ``blocked`` (revision 0012).
    Index(
        "leads_blocked", "session", postgresql_where=text("status = 'queued' AND waiting_on > 0")
    ),
    # The dashboard's latest failures, read in the order they are shown.
    Index(
        "leads_failed_recent",
        text("updated_at DESC"),
        text("id DESC"),
        postgresql_where=text("status = 'failed'"),
    ),
    # The sweeper's index: expired leases, across sessions or in one.
    Index("leads_leased_expiry", "lease_expires_at", postgresql_where=text("status = 'leased'")),
    # A session's leads of one status in id order: counts by status, the retry of its failed
    # leads, an operator's list of its leads and the bulk verbs, a page at a time (revision
    # 0022; app.store.statements.listing).
    Index("leads_session_status_id", "session", "status", "id"),
    # The leased leads of a session per key: what a keyed lease counts (revision 0009).
    Index(
        "leads_leased_keys",
        "session",
        "concurrency_key",
        postgresql_where=text("status = 'leased' AND concurrency_key IS NOT NULL"),
    ),
    # The parked leads of a session per key, best first: what a key that freed room brings
    # back (revision 0018; app.store.statements.parking).
    Index(
        "leads_parked",
        "session",
        "concurrency_key",
        text("priority DESC"),
        "id",
        postgresql_where=text(PARKED),
    ),
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
# ``session``: the session the request names ('' across sessions), so on a cluster a key
# lives on its session's shard; there the primary key is (session, verb, key) (0026).
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("verb", Text, nullable=False),
    Column("key", Text, nullable=False),
    Column("request", Text, nullable=False),
    Column("answer", JSONB, nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("session", Text, nullable=False, server_default=text("''")),
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
    # No lease of the session begins before this instant (revision 0009): not a setting.
    Column("paused_until", DateTime(timezone=True), nullable=True),
    Column("max_leased_per_key", Integer, nullable=True),
    Column("max_runtime_s", Integer, nullable=True),
    # Backpressure (revision 0019): at most this many queued leads once a push commits (the
    # trigger leads_max_queued); NULL: the service's LEASEQ_MAX_QUEUED (leaseq_config).
    Column("max_queued", Integer, nullable=True),
    CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="session_settings_session_valid"),
    CheckConstraint("weight > 0", name="session_settings_weight_positive"),
    CheckConstraint("max_leased >= 0", name="session_settings_max_leased_nonnegative"),
    CheckConstraint("rate_per_s > 0", name="session_settings_rate_positive"),
    CheckConstraint(
        "burst IS NULL OR (burst >= 1 AND rate_per_s IS NOT NULL)",
        name="session_settings_burst_with_rate",
    ),
    CheckConstraint("max_leased_per_key >= 1", name="session_settings_max_leased_per_key_positive"),
    CheckConstraint(
        f"max_runtime_s BETWEEN 1 AND {MAX_RUNTIME_S}", name="session_settings_max_runtime_valid"
    ),
    CheckConstraint("max_queued >= 1", name="session_settings_max_queued_positive"),
    PrimaryKeyConstraint("session", name="session_settings_pkey"),
)

# Settings of the service kept in the database (revision 0019), for what runs without an API
# process: ``max_queued`` (LEASEQ_MAX_QUEUED, written by each API process as it starts) is
# read by the trigger leads_max_queued, which bounds leaseq_push in a producer's transaction
# as it bounds the API's push.
leaseq_config = Table(
    "leaseq_config",
    metadata,
    Column("name", Text, nullable=False),
    Column("value", Text, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("name", name="leaseq_config_pkey"),
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


# Scoped API tokens: a name, a role, a session pattern and the token's SHA-256, never the
# token (revision 0008; app.store.statements.tokens). A live token's name is unique; a revoked one's
# row stays for the audit.
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("name", Text, nullable=False),
    Column("role", Text, nullable=False),
    Column("sessions", Text, nullable=False),
    Column("hash", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("last_used_at", DateTime(timezone=True), nullable=True),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    CheckConstraint(f"name ~ '{TOKEN_NAME_PATTERN}'", name="api_tokens_name_valid"),
    CheckConstraint(_in("role", TOKEN_ROLES), name="api_tokens_role_valid"),
    CheckConstraint(f"sessions ~ '{SESSION_SCOPE_PATTERN}'", name="api_tokens_sessions_valid"),
    UniqueConstraint("hash", name="api_tokens_hash_key"),
    Index("api_tokens_live_name", "name", unique=True, postgresql_where=text("revoked_at IS NULL")),
)

# Which token (by name) took each operator action, by the database clock (revision 0008).
operator_actions = Table(
    "operator_actions",
    metadata,
    Column("id", BigInteger, Identity(always=True), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("token", Text, nullable=False),
    Column("action", Text, nullable=False),
    Column("session", Text, nullable=True),
    Column("lead_id", BigInteger, nullable=True),
    Column("detail", JSONB, nullable=True),
    Index("operator_actions_at", "at"),
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


# The leases of each key that ended since a limited lease of its session last looked, per
# writer's slot (revision 0018; app.store.statements.parking): kept by the trigger
# leads_key_frees, read and deleted by tend_keys.
lead_key_frees = Table(
    "lead_key_frees",
    metadata,
    Column("session", Text, nullable=False),
    Column("concurrency_key", Text, nullable=False),
    Column("slot", Integer, nullable=False),
    Column("n", BigInteger, nullable=False),
    PrimaryKeyConstraint("session", "concurrency_key", "slot", name="lead_key_frees_pkey"),
)


# The edges of dependencies (revision 0012): ``lead_id`` waits on ``after_id``, both leads of
# ``session``; read by the trigger leads_dependents from the parent's side.
lead_dependencies = Table(
    "lead_dependencies",
    metadata,
    Column("session", Text, nullable=False),
    Column("after_id", BigInteger, nullable=False),
    Column("lead_id", BigInteger, nullable=False),
    PrimaryKeyConstraint("session", "after_id", "lead_id", name="lead_dependencies_pkey"),
)


# Requests waiting for a lead's outcome (GET /leads/{id}?wait_s=n), one row each while they
# wait, so the trigger leads_ended notifies only when someone may listen (revision 0010;
# app.store.statements.outcomes).
lead_waits = Table(
    "lead_waits",
    metadata,
    Column("id", UUID, primary_key=True),
    Column("lead_id", BigInteger, nullable=False),
    Column("until", DateTime(timezone=True), nullable=False),
    Index("lead_waits_lead", "lead_id"),
)


# Schedules (revision 0010): a lead pushed into ``session`` at each tick of ``cron`` in
# ``timezone``; ``next_tick`` is the next one due, on the database clock, advanced by a
# guarded UPDATE in the transaction that pushes the tick's lead (app.store.statements.schedules).
schedules = Table(
    "schedules",
    metadata,
    Column("name", Text, nullable=False),
    Column("session", Text, nullable=False),
    Column("cron", Text, nullable=False),
    Column("timezone", Text, nullable=False),
    Column("lead", JSONB, nullable=False),
    Column("next_tick", DateTime(timezone=True), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=text("now()")),
    PrimaryKeyConstraint("name", name="schedules_pkey"),
    CheckConstraint(f"name ~ '{SESSION_PATTERN}'", name="schedules_name_valid"),
    CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="schedules_session_valid"),
    CheckConstraint("jsonb_typeof(lead) = 'object'", name="schedules_lead_object"),
    Index("schedules_next_tick", "next_tick"),
)


# What the API cannot give back of a JSON value (revision 0020; NULL: nothing): an integer
# of more than MAX_INTEGER_DIGITS digits (Python reads no longer one), or a number with a
# fraction beyond a double's range (it would read as infinity, which JSON cannot write).
# Only the numbers of 1e308 or more in magnitude pass the path's filter, so an ordinary
# value costs one walk. The REST push refuses both as it parses (app.api.body); the table's
# check leads_payload_readable and leaseq_push apply it to every other door.
JSON_FAULT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_json_fault(value jsonb) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT 'holds ' || CASE WHEN n::text ~ '[.]' THEN 'a number beyond the range of a double'
                            ELSE 'an integer of more than {MAX_INTEGER_DIGITS} digits' END
           || ' (' || left(n::text, 20) || '..., ' || length(n::text) || ' characters)'
    FROM jsonb_path_query(value, 'strict $.** ? (@.type() == "number"
                                                && (@ >= 1e308 || @ <= -1e308))') AS n
    WHERE CASE WHEN n::text ~ '[.]'
               THEN abs(n::text::numeric) >= 2::numeric ^ 1024 - 2::numeric ^ 970
               ELSE length(ltrim(n::text, '-')) > {MAX_INTEGER_DIGITS} END
    LIMIT 1
$$
"""

# A push of one lead inside the caller's own transaction (revision 0007): what
# app.domain.queue.Queue.push does for one lead, with the service's defaults and the wire's limits,
# so the lead, its ledger row and its counts commit or roll back with the caller's work.
# Bad input raises SQLSTATE 22023 (invalid_parameter_value), naming the argument as the API
# names the field. The payload's size is its jsonb text's (the service's default limit:
# the function cannot read an API process's LEASEQ_MAX_PAYLOAD_BYTES); its depth is judged
# by a jsonpath (level 0 is the payload itself, so a container at level MAX_JSON_DEPTH is
# one too deep). The time is the caller's statement's (now() would be its transaction's
# start). NOTIFY is delivered at commit, and of identical payloads of one transaction only
# one: each push of a transaction names how many it has pushed so far (leaseq.pushes, a
# setting of the transaction), so no payload repeats and the wakes add up to at least the
# leads that became available.
PUSH_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_push(
    session text,
    payload jsonb,
    priority integer DEFAULT 0,
    key text DEFAULT NULL,
    delay_s double precision DEFAULT 0,
    max_attempts integer DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    stamp timestamptz := statement_timestamp();
    new_id bigint;
    pushes integer;
BEGIN
    IF session IS NULL OR session !~ '{SESSION_PATTERN}' THEN
        RAISE EXCEPTION 'session: must match {SESSION_PATTERN}'
            USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF octet_length(payload::text) > {DEFAULT_MAX_PAYLOAD_BYTES} THEN
        RAISE EXCEPTION 'payload: must be at most % bytes as JSON text (is %)',
            {DEFAULT_MAX_PAYLOAD_BYTES}, octet_length(payload::text) USING ERRCODE = '22023';
    END IF;
    IF jsonb_path_exists(payload, 'strict $.**{{{MAX_JSON_DEPTH} to last}} ? '
                                  '(@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'payload: must not nest arrays and objects deeper than {MAX_JSON_DEPTH}'
            USING ERRCODE = '22023';
    END IF;
    IF leaseq_json_fault(payload) IS NOT NULL THEN
        RAISE EXCEPTION 'payload: %', leaseq_json_fault(payload) USING ERRCODE = '22023';
    END IF;
    IF priority IS NULL THEN
        RAISE EXCEPTION 'priority: must be an integer' USING ERRCODE = '22023';
    END IF;
    IF key IS NOT NULL AND NOT length(key) BETWEEN 1 AND {MAX_KEY_CHARS} THEN
        RAISE EXCEPTION 'key: must be a string of 1 to {MAX_KEY_CHARS} characters, or null'
            USING ERRCODE = '22023';
    END IF;
    IF delay_s IS NULL OR NOT (delay_s >= 0 AND delay_s <= {MAX_DELAY_S:.0f}) THEN
        RAISE EXCEPTION 'delay_s: must be a number of seconds >= 0 and <= {MAX_DELAY_S:.0f}'
            USING ERRCODE = '22023';
    END IF;
    IF max_attempts IS NOT NULL AND NOT max_attempts BETWEEN 1 AND {MAX_ATTEMPTS} THEN
        RAISE EXCEPTION 'max_attempts: must be an integer from 1 to {MAX_ATTEMPTS}, or null'
            USING ERRCODE = '22023';
    END IF;
    LOOP
        WITH inserted AS (
            INSERT INTO leads (id, session, priority, payload, key, max_attempts,
                               available_at, scheduled, created_at, updated_at)
            OVERRIDING SYSTEM VALUE
            VALUES (nextval('leads_id_seq'), leaseq_push.session, leaseq_push.priority,
                    leaseq_push.payload, leaseq_push.key,
                    coalesce(leaseq_push.max_attempts, {DEFAULT_MAX_ATTEMPTS}),
                    stamp + make_interval(secs => leaseq_push.delay_s), leaseq_push.delay_s > 0,
                    stamp, stamp)
            ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
            RETURNING id, session, status, attempts, owner
        ),
        ledger AS (
            INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
            SELECT id, session, 'pushed', status, attempts, owner, stamp FROM inserted
        )
        SELECT id INTO new_id FROM inserted;
        EXIT WHEN new_id IS NOT NULL;
        -- The key is in the session already: its lead's id, and nothing else is done.
        SELECT id INTO new_id FROM leads
        WHERE session = leaseq_push.session AND key = leaseq_push.key;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        -- That lead was deleted (pruned) in between: push again.
    END LOOP;
    IF delay_s = 0 THEN
        pushes := coalesce(nullif(current_setting('leaseq.pushes', true), ''), '0')::integer + 1;
        PERFORM set_config('leaseq.pushes', pushes::text, true);
        PERFORM pg_notify('{NOTIFY_CHANNEL}', session || ' ' || pushes);
    END IF;
    RETURN new_id;
END
$$
"""

# What metadata.create_all builds besides tables, as the migrations do (tests compare both).
_function = DDL(COUNT_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]  # DDL formats %
event.listen(metadata, "before_create", _function)
_json_fault = DDL(JSON_FAULT_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "before_create", _json_fault)  # the check of leads reads it
for _name, _when in TRIGGERS.items():
    _trigger = DDL(CREATE_TRIGGER.format(_name, _when))  # type: ignore[no-untyped-call]
    event.listen(leads, "after_create", _trigger)
_push = DDL(PUSH_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _push)
_max_queued = DDL(MAX_QUEUED_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _max_queued)
_max_queued_trigger = DDL(MAX_QUEUED_TRIGGER)  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _max_queued_trigger)
_hmac = DDL(HMAC_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _hmac)
_fence = DDL(FENCE_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _fence)
_ended = DDL(ENDED_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _ended)
_ended_trigger = DDL(ENDED_TRIGGER)  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _ended_trigger)
_dependents = DDL(DEPENDENTS_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _dependents)
_dependents_trigger = DDL(DEPENDENTS_TRIGGER)  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _dependents_trigger)
_frees = DDL(FREES_FUNCTION.replace("%", "%%"))  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _frees)
_frees_trigger = DDL(FREES_TRIGGER)  # type: ignore[no-untyped-call]
event.listen(metadata, "after_create", _frees_trigger)


def sqlalchemy_url(url: str) -> URL:
    """The URL with the psycopg 3 driver, whatever scheme the user wrote (for Alembic)."""
    parsed = make_url(url)
    if parsed.drivername in ("postgres", "postgresql", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed
