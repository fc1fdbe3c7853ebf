"""The statements of scoped API tokens and of the operators' audit trail (revision 0008).

A token row holds its SHA-256 only, never the token. A revocation is one
statement that stamps ``revoked_at`` and NOTIFYs ``TOKENS_CHANNEL`` with the
revoked hash, so every API process's cache (``app.domain.tokens``) drops it at
once. ``last_used_at`` is written by the lookup itself, at most once a minute
per token (``TOUCH_EVERY_S``), so checking a token is never a write per request.

The rules of the same conventions as ``app.store.statements``: bound
parameters only, the database's clock, one statement per change. Knows
nothing of HTTP.
"""

from __future__ import annotations

from functools import cache

TOKENS_CHANNEL = "leaseq_tokens"
TOUCH_EVERY_S = 60

TOKEN_COLUMNS = "name, role, sessions, created_at, expires_at, last_used_at, revoked_at"


@cache
def create() -> str:
    """Store a token; no row when a live token already has the name."""
    return f"""
INSERT INTO api_tokens (name, role, sessions, hash, expires_at)
VALUES (%(name)s, %(role)s, %(sessions)s, %(hash)s,
        now() + make_interval(secs => %(expires_s)s::float8))
ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING
RETURNING {TOKEN_COLUMNS}
"""


@cache
def lookup() -> str:
    """The live token with this hash and how long it stays valid (``valid_s``, on the
    database clock; NULL: no expiry); none when unknown, revoked or expired. Stamps
    ``last_used_at`` in the same statement when it is older than ``TOUCH_EVERY_S``."""
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


@cache
def listing() -> str:
    """Every token, live or not, newest first (never a hash)."""
    return f"SELECT {TOKEN_COLUMNS} FROM api_tokens ORDER BY created_at DESC, name"


@cache
def revoke() -> str:
    """Revoke the live token of a name, and tell every process's cache (the hash)."""
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


@cache
def audit() -> str:
    """One operator action in the audit trail, by the database clock."""
    return """
INSERT INTO operator_actions (token, action, session, lead_id, detail)
VALUES (%(token)s, %(action)s, %(session)s, %(lead_id)s, %(detail)s)
"""


@cache
def audit_trail() -> str:
    """The audit trail, newest first, at most ``limit`` rows."""
    return """
SELECT id, at, token, action, session, lead_id, detail FROM operator_actions
ORDER BY id DESC LIMIT %(limit)s
"""


@cache
def lead_sessions() -> str:
    """The session of each of these leads (a lead's session never changes)."""
    return "SELECT id, session FROM leads WHERE id = ANY(%(ids)s::bigint[])"


@cache
def sessions_like() -> str:
    """The sessions with leads whose names match an SQL LIKE pattern (``lead_counts``:
    its cost follows the sessions, not the leads)."""
    return "SELECT DISTINCT session FROM lead_counts WHERE session LIKE %(like)s"
