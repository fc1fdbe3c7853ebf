"""The statements of scoped API tokens and of the operators' audit trail (revision 0008).

A token row holds its SHA-256 only, never the token. A revocation is one
statement that stamps ``revoked_at`` and NOTIFYs ``TOKENS_CHANNEL`` with the
revoked hash, so every API process's cache (``app.domain.tokens``) drops it at
once. ``last_used_at`` is written by the lookup itself, at most once a minute
per token (``TOUCH_EVERY_S``), so checking a token is never a write per request.

Typed builders as the rest of ``app.store.statements``: bound
parameters only, the database's clock, one statement per change. Knows
nothing of HTTP.
"""

from __future__ import annotations

from app.store.statements._build import statement

TOKENS_CHANNEL = "leaseq_tokens"
TOUCH_EVERY_S = 60

TOKEN_COLUMNS = "name, role, sessions, created_at, expires_at, last_used_at, revoked_at"


def _token_create() -> str:
    return f"""
INSERT INTO api_tokens (name, role, sessions, hash, expires_at)
VALUES (%(name)s, %(role)s, %(sessions)s, %(hash)s,
        now() + make_interval(secs => %(expires_s)s::float8))
ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING
RETURNING {TOKEN_COLUMNS}
"""


@statement(_token_create)
def token_create(
    *, name: str, role: str, sessions: str, hash: str, expires_s: float | None
) -> None:
    """Store a token; no row when a live token already has the name."""


def _token_lookup() -> str:
    return f"""
WITH live AS (
    SELECT name, role, sessions, expires_at, last_used_at FROM api_tokens
    WHERE hash = %(hash)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
),
touched AS (
    UPDATE api_tokens SET last_used_at = now()
    WHERE hash = %(hash)s AND revoked_at IS NULL
      AND (last_used_at IS NULL OR last_used_at < now() - interval '{TOUCH_EVERY_S} seconds')
      AND EXISTS (SELECT FROM live)
)
SELECT name, role, sessions, extract(epoch FROM expires_at - now())::float8 AS valid_s
FROM live
"""


@statement(_token_lookup)
def token_lookup(*, hash: str) -> None:
    """The live token with this hash and how long it stays valid (``valid_s``, on the
    database clock; NULL: no expiry); none when unknown, revoked or expired. Stamps
    ``last_used_at`` in the same statement when it is older than ``TOUCH_EVERY_S``."""


def _tokens_listing() -> str:
    return f"SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY created_at DESC, name"


@statement(_tokens_listing)
def tokens_listing() -> None:
    """Every token, live or not, newest first (never a hash)."""


def _token_revoke() -> str:
    return f"""
WITH revoked AS (
    UPDATE api_tokens SET revoked_at = now()
    WHERE name = %(name)s AND revoked_at IS NULL
    RETURNING {TOKEN_COLUMNS}, hash
)
SELECT {TOKEN_COLUMNS}, hash,
       (SELECT count(pg_notify('{TOKENS_CHANNEL}', r.hash)) FROM revoked AS r) AS notified
FROM revoked
"""


@statement(_token_revoke)
def token_revoke(*, name: str) -> None:
    """Revoke the live token of a name, and tell every process's cache (the hash)."""


def _audit() -> str:
    return """
INSERT INTO operator_actions (token, action, session, lead_id, detail)
VALUES (%(token)s, %(action)s, %(session)s, %(lead_id)s, %(detail)s)
"""


@statement(_audit)
def audit(
    *, token: str, action: str, session: str | None, lead_id: int | None, detail: str | None
) -> None:
    """One operator action in the audit trail, by the database clock."""


def _audit_trail() -> str:
    return """
SELECT id, at, token, action, session, lead_id, detail FROM operator_actions
ORDER BY id DESC LIMIT %(limit)s
"""


@statement(_audit_trail)
def audit_trail(*, limit: int) -> None:
    """The audit trail, newest first, at most ``limit`` rows."""


def _lead_sessions() -> str:
    return "SELECT id, session FROM leads WHERE id = ANY(%(ids)s::bigint[])"


@statement(_lead_sessions)
def lead_sessions(*, ids: list[int]) -> None:
    """The session of each of these leads (a lead's session never changes)."""


def _lead_sessions_on_nodes() -> str:
    return """
WITH commands AS (
    -- One query per node, over that node's shards of leads: 'id session' per lead found.
    SELECT p.nodename, p.nodeport,
           'SELECT string_agg(id || '' '' || session, '','') FROM ('
           || string_agg(format('SELECT id, session FROM %%s WHERE id = ANY(%%L::bigint[])',
                                shard_name(s.logicalrelid, s.shardid), %(ids)s::bigint[]::text),
                         ' UNION ALL ' ORDER BY s.shardid)
           || ') AS found' AS command
    FROM pg_dist_shard AS s JOIN pg_dist_shard_placement AS p USING (shardid)
    WHERE s.logicalrelid = 'leads'::regclass AND p.shardstate = 1
    GROUP BY p.nodename, p.nodeport
)
SELECT r.node_name AS node, r.node_port AS port, r.success, r.result
FROM (SELECT array_agg(nodename) AS nodes, array_agg(nodeport) AS ports,
             array_agg(command) AS commands FROM commands) AS c,
     LATERAL master_run_on_worker(c.nodes, c.ports, c.commands, true) AS r
"""


@statement(_lead_sessions_on_nodes)
def lead_sessions_on_nodes(*, ids: list[int]) -> None:
    """The session of each of these leads on a Citus cluster, asked of each node that holds
    shards of ``leads`` for its own shards (``master_run_on_worker``, in parallel), so a
    node that cannot be reached fails its own row (``success`` false, ``result`` why), not
    the statement: a row per node, ``result`` the leads it holds as ``id session`` pairs
    joined by commas. A lead id alone names no shard: ``lead_sessions`` on a cluster
    reaches every node, and fails whole while one is stopped."""


def _sessions_like() -> str:
    return "SELECT DISTINCT session FROM lead_counts WHERE session LIKE %(like)s"


@statement(_sessions_like)
def sessions_like(*, like: str) -> None:
    """The sessions with leads whose names match an SQL LIKE pattern (``lead_counts``:
    its cost follows the sessions, not the leads)."""
