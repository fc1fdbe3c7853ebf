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


def _sessions_like() -> str:
    return "SELECT DISTINCT session FROM lead_counts WHERE session LIKE %(like)s"


@statement(_sessions_like)
def sessions_like(*, like: str) -> None:
    """The sessions with leads whose names match an SQL LIKE pattern (``lead_counts``:
    its cost follows the sessions, not the leads)."""
