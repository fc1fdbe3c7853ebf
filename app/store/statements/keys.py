"""Idempotency keys (``app.domain.idempotency``): claimed, answered and forgotten."""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import (
    NOW,
)

# -- idempotency keys (app.domain.idempotency) ----------------------------------------------


def _claim_key() -> str:
    return f"""
INSERT INTO idempotency_keys (session, verb, key, request, created_at)
VALUES (%(session)s, %(verb)s, %(key)s, %(request)s, {NOW})
ON CONFLICT DO NOTHING
RETURNING verb
"""


@statement(_claim_key)
def claim_key(*, session: str, key: str, request: str, verb: str, now: datetime | None) -> None:
    """Claim a key for a request of ``session`` (its shard's row on a cluster); no row back
    when it is taken.

    A key another open transaction claimed makes this one wait for it to end:
    a retry that overtakes its first try gets that try's answer, or the key. No conflict
    target: the primary key is ``(verb, key)`` on one PostgreSQL, ``(session, verb, key)``
    on a cluster (revision 0026).
    """


def _remember_answer() -> str:
    return """
UPDATE idempotency_keys SET answer = CAST(%(answer)s AS jsonb)
WHERE session = %(session)s AND verb = %(verb)s AND key = %(key)s
"""


@statement(_remember_answer)
def remember_answer(*, answer: str, session: str, key: str, verb: str) -> None:
    """Store the answer of the request that claimed the key (in its transaction)."""


def _remember_key() -> str:
    return f"""
INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
VALUES (%(session)s, %(verb)s, %(key)s, %(request)s, {NOW}, CAST(%(answer)s AS jsonb))
"""


@statement(_remember_key)
def remember_key(
    *, session: str, verb: str, key: str, request: str, answer: str, now: datetime | None
) -> None:
    """Claim a key with its answer at once, after its work in the same transaction (a keyed
    lease on a cluster: ``lease_keyed`` without ``remember``). No ON CONFLICT: a first try
    that committed the key meanwhile makes it fail (unique_violation), and the transaction
    with it."""


def _remembered() -> str:
    return """
SELECT request, answer FROM idempotency_keys
WHERE session = %(session)s AND verb = %(verb)s AND key = %(key)s
"""


@statement(_remembered)
def remembered(*, session: str, key: str, verb: str) -> None:
    """The request a key of ``session`` was claimed for, and its answer."""


def _remembered_anywhere() -> str:
    return "SELECT request, answer FROM idempotency_keys WHERE verb = %(verb)s AND key = %(key)s"


@statement(_remembered_anywhere)
def remembered_anywhere(*, key: str, verb: str) -> None:
    """The request a key was claimed for, whatever its session: on one PostgreSQL, after a
    claim refused by a row of another session (a key sent again for another session, or
    kept from before revision 0026); every shard on a cluster, where that never happens."""


def _prune_keys(skip_locked: bool) -> str:
    return f"""
WITH doomed AS (
    SELECT session, verb, key FROM idempotency_keys
    WHERE created_at < {NOW} - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    {"FOR UPDATE SKIP LOCKED" if skip_locked else ""}
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.session = doomed.session AND k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned
"""


@statement(_prune_keys, skip_locked=BOTH)
def prune_keys(
    *, limit: int, older_than_s: float, now: datetime | None, skip_locked: bool = True
) -> None:
    """Delete up to ``limit`` idempotency keys older than ``older_than_s`` (oldest first).

    SKIP LOCKED leaves a key another pruner chose to it; a Citus cluster refuses that lock
    across shards (the keys are distributed by session), and there the pruners may wait on each
    other instead: a key another one deleted meanwhile is just not counted twice."""
