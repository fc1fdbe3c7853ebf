"""A lease token: unguessable, and carrying the session of its lead.

The token is what a worker sends back to renew, complete or release its lease, with the
lead's id. On a Citus cluster an id names no shard, while the session does: a token that
carries it lets the service add ``session = …`` to the statement, which then runs on that
session's shard alone (docs/scaling.md, "Routing the lead-scoped hot statements").

Workers treat the token as opaque (the contract says so): only this module reads it. The
random part decides the lease's validity, checked by the database as before; the session
part only routes, and a token whose session was altered finds no lease on that shard.
"""

from __future__ import annotations

import re
import secrets

from leaseq.limits import SESSION_PATTERN

# In neither the random part (URL-safe base64) nor a session name.
SEPARATOR = "~"
_SESSION = re.compile(SESSION_PATTERN)


def mint(session: str) -> str:
    """A new token for a lease of ``session`` (192 random bits, then the session)."""
    return f"{secrets.token_urlsafe(24)}{SEPARATOR}{session}"


def session_of(token: str) -> str | None:
    """The session ``token`` carries; None for a token without one (minted before tokens
    carried it) or with something else there (a forged token, which no lease matches)."""
    _, separator, session = token.partition(SEPARATOR)
    if not separator or not _SESSION.fullmatch(session):
        return None
    return session
