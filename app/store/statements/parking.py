"""Concurrency keys at their cap (docs/contract.md#flow-control): the ready leads of a full
key parked out of the lease's way, and brought back when their key frees room.

A lease of a session with ``max_leased_per_key`` walks ``leads_ready`` in leasing order
and passes over the leads of keys at their cap. Without more, a key with a long backlog
at the head of the session is walked over by every lease. So, under the session's lock
and before each such lease, ``tend_keys``:

- **parks** the ready leads of full keys among the first of the session in leasing order
  (``parked``, and kept as a blocked lead is: ``scheduled`` at ``BLOCKED_UNTIL``, its
  ``available_at`` kept in ``ready_at``), again until the lease's ``max`` and a margin
  (``PARK_MARGIN``) of what it looked at are leads it may take, so the lease's claim walks
  no further than that, and each lead is parked once, not walked over at every lease;
- **brings back** the best parked leads of each key that freed room, as many as it has
  room for, found through ``lead_key_frees``: a row per key (and writer's slot) whose
  leases ended since a lease of its session last looked, written by the trigger
  ``leads_key_frees`` in the statement that ended them (every way a lease ends passes
  there), and deleted by ``tend_keys`` once seen.

Why no key can keep room with its leads all parked: a lead is parked only by a statement
run under the session's lock whose snapshot counts its key full, so each of the leases
it counted ends after that snapshot, and its end writes a free that commits after it. The
next ``tend_keys`` runs after the parking one committed (the lock), sees that free and
the parked leads together, and brings back what the key has room for. A free is deleted
only as it was seen (``n`` unchanged): a lease that ends while it is read adds to ``n``
and its free stays for the next look. Nor does the look wait for a free a statement is
writing (``SKIP LOCKED``): that statement may end leases of several keys, and the two
would wait on each other in opposite orders; its frees are the next look's. The cap
itself is ``lease_limited``'s, unchanged: parking only moves leads between ready and
parked.

The frees of a session without ``max_leased_per_key`` are never looked at: the pruner
deletes them (``forget_frees``), and a change of a session's settings brings back all
its parked leads (``unpark_session``).
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.dependencies import BLOCKED_UNTIL
from app.store.statements.fragments import LOCKED_NOW, held_of_key, only_session

# A lead parked because its key was full (index ``leads_parked``; the check
# ``leads_parked_queued`` keeps ``parked`` to queued leads). ``scheduled`` at BLOCKED_UNTIL
# keeps it out of every other reader's way, as a blocked lead; ``parked`` alone names it, so
# no index of scheduled leads serves the lookup by key.
PARKED = "status = 'queued' AND parked"
# How many leads beyond the ``max`` of a lease one look at the session's head reads.
PARK_MARGIN = 32
# The slots of lead_key_frees: each backend writes its own, so two statements that end leases
# of one key rarely wait on each other (as lead_counts' slots).
FREE_SLOTS = 64

# The trigger function of leads_key_frees (revision 0018; app.store.schema builds the same):
# once per statement on leads, the keyed leases it ended, per key.
FREES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_key_frees() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Most statements end no keyed lease: one look at the rows they changed.
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE status <> 'leased' AND concurrency_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO lead_key_frees AS f (session, concurrency_key, slot, n)
    SELECT o.session, o.concurrency_key, pg_backend_pid() % {FREE_SLOTS}, count(*)
    FROM old_rows AS o JOIN new_rows AS n ON n.id = o.id
    WHERE o.status = 'leased' AND o.concurrency_key IS NOT NULL AND n.status <> 'leased'
    GROUP BY o.session, o.concurrency_key ORDER BY o.session, o.concurrency_key
    ON CONFLICT (session, concurrency_key, slot) DO UPDATE SET n = f.n + excluded.n;
    RETURN NULL;
END
$$
"""
# A parked lead (``l``) brought back: ready again at its own time (kept in ``ready_at``).
_BROUGHT_BACK = f"parked = false, scheduled = l.ready_at > {LOCKED_NOW}, available_at = l.ready_at"
# The session's cap per key, in tend_keys.
_CAP = "(SELECT n FROM cap)"
FREES_TRIGGER = (
    "CREATE TRIGGER leads_key_frees AFTER UPDATE ON leads "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_key_frees()"
)


def _tend_keys() -> str:
    return f"""
WITH cap AS (
    SELECT max_leased_per_key AS n FROM session_settings
    WHERE session = %(session)s AND max_leased_per_key IS NOT NULL
),
frees AS (
    SELECT concurrency_key, slot, n FROM lead_key_frees
    WHERE session = %(session)s AND EXISTS (SELECT FROM cap)
),
freed AS (
    SELECT concurrency_key, (SELECT n FROM cap) - {held_of_key("f.concurrency_key", _CAP)} AS room
    FROM (SELECT DISTINCT concurrency_key FROM frees) AS f
),
back AS (
    -- The best parked leads of each key that freed room, as many as its room.
    SELECT p.id FROM freed AS f
    CROSS JOIN LATERAL (
        SELECT id FROM leads
        WHERE session = %(session)s AND concurrency_key = f.concurrency_key AND {PARKED}
        ORDER BY priority DESC, id
        LIMIT greatest(f.room, 0)
        FOR UPDATE SKIP LOCKED
    ) AS p
),
head AS (
    SELECT id, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND EXISTS (SELECT FROM cap)
    ORDER BY priority DESC, id
    LIMIT %(window)s
),
full_keys AS (
    SELECT k.concurrency_key FROM (
        SELECT DISTINCT concurrency_key FROM head WHERE concurrency_key IS NOT NULL) AS k
    WHERE {held_of_key("k.concurrency_key", _CAP)} >= (SELECT n FROM cap)
),
unparked AS (
    UPDATE leads AS l
    SET {_BROUGHT_BACK}
    FROM back
    WHERE l.id = back.id AND l.session = %(session)s
    RETURNING l.id
),
parked AS (
    -- Rechecked as the row is updated: a lead that changed meanwhile is left as it is.
    UPDATE leads AS l
    SET parked = true, scheduled = true, ready_at = l.available_at,
        available_at = '{BLOCKED_UNTIL}'::timestamptz
    FROM head JOIN full_keys USING (concurrency_key)
    WHERE l.id = head.id AND l.session = %(session)s
      AND l.status = 'queued' AND NOT l.scheduled
    RETURNING l.id
),
unlocked AS (
    -- Not one a statement ending a lease of its key writes now (it is for the next look):
    -- this statement, under the session's lock, never waits for such a one.
    SELECT f.concurrency_key, f.slot FROM lead_key_frees AS f
    JOIN frees USING (concurrency_key, slot)
    WHERE f.session = %(session)s
    FOR UPDATE OF f SKIP LOCKED
),
seen AS (
    -- Only as it was read: a free that grew meanwhile stays for the next look.
    DELETE FROM lead_key_frees AS f USING frees JOIN unlocked USING (concurrency_key, slot)
    WHERE f.session = %(session)s AND f.concurrency_key = frees.concurrency_key
      AND f.slot = frees.slot AND f.n = frees.n
)
SELECT (SELECT count(*) FROM unparked) AS unparked, (SELECT count(*) FROM parked) AS parked,
       (SELECT count(*) FROM head) AS looked_at
"""


@statement(_tend_keys)
def tend_keys(*, session: str, window: int, now: datetime | None) -> None:
    """Bring back the parked leads of the keys that freed room and park the ready leads of
    full keys among the first ``window`` of the session (module docstring); run after
    ``lock_settings``, before ``lease_limited``, in its transaction. Nothing for a session
    without ``max_leased_per_key``. Answers how many leads it brought back, parked and
    looked at (``looked_at`` below ``window``: no ready lead is left beyond them)."""


def _unpark_session() -> str:
    return f"""
WITH unparked AS (
    UPDATE leads AS l
    SET {_BROUGHT_BACK}
    WHERE l.session = %(session)s AND {PARKED}
    RETURNING l.id
)
SELECT count(*) AS unparked FROM unparked
"""


@statement(_unpark_session)
def unpark_session(*, session: str, now: datetime | None) -> None:
    """Bring back every parked lead of a session, after its settings changed and under their
    lock: its next leases park again what the new cap holds back, and a session without a
    cap any more parks nothing."""


def _forget_frees(scoped: bool) -> str:
    return f"""
WITH seen AS (
    SELECT f.session, f.concurrency_key, f.slot, f.n FROM lead_key_frees AS f
    WHERE NOT EXISTS (SELECT FROM session_settings AS s
                      WHERE s.session = f.session AND s.max_leased_per_key IS NOT NULL)
      {only_session(scoped, "f.session")}
),
forgotten AS (
    DELETE FROM lead_key_frees AS f USING seen
    WHERE f.session = seen.session AND f.concurrency_key = seen.concurrency_key
      AND f.slot = seen.slot AND f.n = seen.n {only_session(scoped, "f.session")}
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten
"""


@statement(_forget_frees, scoped=BOTH)
def forget_frees(*, session: str | None = None, scoped: bool = False) -> None:
    """Delete the frees of sessions without ``max_leased_per_key`` (nothing reads them), as
    they were read: one that grew meanwhile (the cap was set since) stays. The pruner's,
    across sessions (or in one, when scoped)."""
