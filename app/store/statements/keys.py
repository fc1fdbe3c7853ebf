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
INSERT INTO idempotency_keys (verb, key, request, created_at)
VALUES (%(verb)s, %(key)s, %(request)s, {NOW})
ON CONFLICT (verb, key) DO NOTHING
RETURNING verb
"""


@statement(_claim_key)
def claim_key(*, key: str, request: str, verb: str, now: datetime | None) -> None:
    """Claim a key for a request; no row back when it is taken.

    A key another open transaction claimed makes this one wait for it to end:
    a retry that overtakes its first try gets that try's answer, or the key.
    """


def _remember_answer() -> str:
    return """
UPDATE idempotency_keys SET answer = CAST(%(answer)s AS jsonb)
WHERE verb = %(verb)s AND key = %(key)s
"""


@statement(_remember_answer)
def remember_answer(*, answer: str, key: str, verb: str) -> None:
    """Store the answer of the request that claimed the key (in its transaction)."""


def _remembered() -> str:
    return "SELECT request, answer FROM idempotency_keys WHERE verb = %(verb)s AND key = %(key)s"


@statement(_remembered)
def remembered(*, key: str, verb: str) -> None:
    """The request a key was claimed for, and its answer."""


def _prune_keys(skip_locked: bool) -> str:
    return f"""
WITH doomed AS (
    SELECT verb, key FROM idempotency_keys
    WHERE created_at < {NOW} - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    {"FOR UPDATE SKIP LOCKED" if skip_locked else ""}
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.verb = doomed.verb AND k.key = doomed.key
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
    across shards (the keys are distributed by key), and there the pruners may wait on each
    other instead: a key another one deleted meanwhile is just not counted twice."""
