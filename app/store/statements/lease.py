"""Leasing: the plain, grouped and limited lease statements, and the promotion of due leads.

The three lease statements share one body (``_claim_and_lease``): the claim of
ready and due leads, the lease, the ledger; they differ in what gates the
claim and who holds each lead. ``app.leasing.session`` runs them.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import (
    LEAD_COLUMNS,
    LEASE_COLUMNS,
    LIMITED,
    LOCKED_NOW,
    NOTIFY_CHANNEL,
    NOW,
    ONLY_LOCKED,
    SETTINGS,
    VALID_LEASE,
    held_of_key,
    ledger_rows,
    logged,
    only_session,
    plus_seconds,
    qualified,
    seconds_between,
    valid_lease,
)
from app.store.statements.outcomes import ended_notice

# Due scheduled leads one lease statement considers (and promotes) at most, so a lease stays
# short however many came due at once; the sweeper promotes the rest (``promote``, in batches
# of ``app.domain.queue.PROMOTE_BATCH``).
DUE_PER_LEASE = 100


def _lease_next(ledger: bool) -> str:
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=_limited_gate(),
        only_if="AND NOT EXISTS (SELECT FROM limited)",
        limit="%(max)s",
        after="",
        answer=_gated_answer(),
    )


@statement(_lease_next, ledger=BOTH)
def lease_next(
    *,
    session: str,
    max: int,
    owner: str,
    tokens: list[str],
    ttl_s: float,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    api_token: str | None = None,
) -> None:
    """Lease up to ``max`` available leads of a session, highest priority then oldest first.

    Two sources, each read through its own partial index and locked with
    SKIP LOCKED: ready leads (``leads_ready``: session, priority, id), so the
    scan never walks over delayed leads; and up to ``DUE_PER_LEASE`` scheduled
    leads of the session that came due (``leads_scheduled_due``). The best
    ``max`` of both are leased; the other due ones are promoted to ready in
    the same statement (disjoint rows, so no row is updated twice).

    The ids are chosen in CTEs, which PostgreSQL evaluates exactly once, then
    updated — never ``WHERE id IN (SELECT … LIMIT n)``, which the planner may
    re-run and so update more than n rows (PostgreSQL bug #15715).

    A session with a cap or a rate (``session_settings``, one index probe) is
    not leased here: the statement takes nothing and answers one row whose
    ``limited`` is true, and the caller leases through ``lease_limited``, under
    the session's lock. Otherwise each lead leased is a row (``limited`` false),
    and nothing leased is one row of NULLs.
    """


def _lease_keyed(ledger: bool, remember: bool) -> str:
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=_KNOWN_KEY + _limited_gate(),
        only_if="AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known)",
        limit="%(max)s",
        after=_REMEMBERED if remember else "",
        answer=f"""SELECT {LEASE_COLUMNS}, gate.*
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id""",
    )


# The key's first request, when one committed before this statement began.
_KNOWN_KEY = """known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
"""
# The key claimed with its answer, in the statement of the lease: only when it leased (a
# lease that takes nothing leaves the key free). No ON CONFLICT: a first try that commits
# the key while this one runs makes this one fail whole (unique_violation), leasing nothing.
_REMEMBERED = f""",
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, {NOW}, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
)"""


@statement(_lease_keyed, ledger=BOTH, remember=BOTH)
def lease_keyed(
    *,
    session: str,
    max: int,
    owner: str,
    tokens: list[str],
    ttl_s: float,
    key: str,
    key_session: str,
    request: str,
    now: datetime | None,
    ledger: bool,
    remember: bool = True,
    ledger_by_row: bool = False,
    api_token: str | None = None,
) -> None:
    """``lease_next`` with an idempotency key (``request``: the fingerprint of what it names),
    in one statement: the lease and the memory of it commit together. ``key_session``: the
    session the key's row is kept under (``idempotency.session_of``): ``session`` for a
    lease of one session, so on a cluster the whole statement runs on its shard.

    A key a committed request holds already leases nothing: every row answers that
    request's fingerprint and answer (``known_request``, ``known_answer``), for the caller
    to hand back the leases it took that are still valid. Else the leads leased are stored
    as the key's answer in the same statement (``app.domain.idempotency``'s format). A first
    try still running with the same key makes this one fail (unique_violation, nothing
    leased): the caller then waits for that try through the transaction of
    ``idempotency.once``. A limited session answers ``limited`` as ``lease_next`` does.

    ``remember`` off (a cluster): the answer is not stored here but by ``remember_key``
    right after, in the same transaction. Citus plans an ``INSERT … SELECT`` in a CTE apart
    from the rest of the statement, which would then not be a router statement; two
    statements of one session's shard are (docs/scaling.md).
    """


def _complete_and_lease(ledger: bool, keyed: bool, routed: bool, remember: bool) -> str:
    # A key its first request holds for another request gates the completion too: the 422
    # that answers it changes nothing (docs/contract.md#retries-and-idempotency-key).
    unclaimed = (
        " AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)" if keyed else ""
    )
    completion = f"""req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = {NOW}, {logged("completed")}
    FROM req
    WHERE l.id = req.lead_id AND {valid_lease(routed)}{unclaimed}
    RETURNING l.*
){ledger_rows("completed", "completed", enabled=ledger, name="completion_ledger")},
"""
    gate = "EXISTS (SELECT FROM limited) AS limited"
    if keyed:
        gate += """,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer"""
    only_if = "AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited)"
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=(_KNOWN_KEY if keyed else "") + completion + _limited_gate(),
        only_if=only_if + (" AND NOT EXISTS (SELECT FROM known)" if keyed else ""),
        limit="%(max)s",
        after=_REMEMBERED if keyed and remember else "",
        answer=f"""SELECT answered.*, gate.*, {ended_notice("completed")}
FROM (SELECT {gate}) AS gate
LEFT JOIN (
    SELECT true AS completion, {LEASE_COLUMNS} FROM completed
    UNION ALL
    SELECT false AS completion, {LEASE_COLUMNS} FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id""",
    )


@statement(_complete_and_lease, ledger=BOTH, keyed=BOTH, routed=BOTH, remember=BOTH)
def complete_and_lease(
    *,
    lead_id: int,
    token: str,
    status: str,
    result: str | None,
    error: str | None,
    session: str,
    max: int,
    owner: str,
    tokens: list[str],
    ttl_s: float,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    keyed: bool = False,
    routed: bool = False,
    remember: bool = True,
    key: str | None = None,
    key_session: str = "",
    request: str | None = None,
    api_token: str | None = None,
) -> None:
    """A completion and, when it completed, the lease of its ``next`` (one session without
    limits), in one statement: the completion's CTE gates the lease's claim, and the ledger
    rows of both are written with them.

    The completion is ``complete_many``'s for one lead (a valid lease, by the database
    clock); the lease is ``lease_next``'s, or ``lease_keyed``'s with ``keyed`` (``key``,
    ``key_session`` and ``request`` then name the idempotency key, where it is kept and
    its fingerprint). The lead completed
    is the row whose ``completion`` is true, each lead leased one whose ``completion`` is
    false; no completion row: the lease was refused (or was completed before) and nothing
    changed, nothing was leased. Every row says ``limited`` (the session has a cap or a
    rate: the completion is done, the lease is left to the limited path), and with ``keyed``
    the key's first request (``known_request``, ``known_answer``) as ``lease_keyed`` does;
    a key held for another request (its fingerprint not ``request``) completes nothing
    either, so the caller's 422 changes nothing.
    ``routed``: the lease completed is of ``session`` too (its token's), so on a cluster the
    whole statement runs on that session's shard. ``remember`` off (a cluster, with
    ``keyed``): the key's answer is written by ``remember_key`` right after, in the same
    transaction, as ``lease_keyed``'s is (Citus plans the ``INSERT … SELECT`` of a CTE apart).
    """


def _lease_together(ledger: bool) -> str:
    """The text of ``lease_together``."""
    callers = f"""known AS (
    SELECT key, request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = ANY(%(keys)s::text[])
),
refused AS (
    -- The callers whose key a committed request holds for another request: their
    -- completions are not made either, so the 422 that answers them changes nothing.
    SELECT DISTINCT s.caller
    FROM unnest(%(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        AS s(caller, key, request)
    JOIN known ON known.key = s.key AND known.request <> s.request
),
req AS (
    SELECT * FROM unnest(%(lead_ids)s::bigint[], %(lease_tokens)s::text[], %(statuses)s::text[],
                         %(results)s::text[], %(errors)s::text[], %(item_callers)s::bigint[])
        AS r(lead_id, token, status, result, error, caller)
    WHERE r.caller NOT IN (SELECT caller FROM refused)
),
ungated AS (
    -- The callers whose lease no completion gates: a keyed lease alone.
    SELECT caller FROM unnest(%(gated)s::bool[]) WITH ORDINALITY AS c(gated, caller)
    WHERE NOT gated
),
locked AS MATERIALIZED (
    -- The rows of the items' valid leases, locked, skipping those another transaction
    -- holds (locked_rows' rule); each found by its id, so the cost follows the items, not
    -- the leases held (nor the dead index entries of the ones ended since the last vacuum).
    SELECT valid.id FROM req CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l WHERE l.id = req.lead_id AND {VALID_LEASE}
        FOR UPDATE OF l SKIP LOCKED
    ) AS valid
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = {NOW}, {logged("completed")}
    FROM req
    WHERE l.id = req.lead_id AND {VALID_LEASE}{ONLY_LOCKED}
    RETURNING l.*, req.caller
){ledger_rows("completed", "completed", enabled=ledger, name="completion_ledger")},
slots AS (
    -- Each caller's slots, in the order the callers came: those of a caller whose
    -- completion went through (or who is not gated by one) and whose key is new.
    SELECT row_number() OVER (ORDER BY s.slot) AS n, s.token, s.owner, s.ttl_s, s.key, s.request
    FROM unnest(%(tokens)s::text[], %(owners)s::text[], %(ttls)s::float8[],
                %(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        WITH ORDINALITY AS s(token, owner, ttl_s, caller, key, request, slot)
    WHERE (s.caller IN (SELECT caller FROM completed) OR s.caller IN (SELECT caller FROM ungated))
      AND (s.key IS NULL OR s.key NOT IN (SELECT key FROM known))
),
"""
    remembered = f""",
remembered AS (
    -- Each keyed caller's leases as its key's answer (no ON CONFLICT: a first try that
    -- commits a key meanwhile makes the whole statement fail, leasing nothing).
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', slots.key, slots.request, {NOW}, jsonb_build_object(
        'ttl_s', slots.ttl_s,
        'leases', jsonb_agg(jsonb_build_array(leased.id, leased.lease_token)
                            ORDER BY leased.priority DESC, leased.id))
    FROM leased JOIN slots ON slots.token = leased.lease_token
    WHERE slots.key IS NOT NULL
    GROUP BY slots.key, slots.request, slots.ttl_s
)"""
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=callers + _limited_gate(),
        only_if="AND EXISTS (SELECT FROM slots) AND NOT EXISTS (SELECT FROM limited)",
        limit="%(max)s",
        after=remembered,
        slotted=True,
        answer=f"""SELECT answered.*, gate.*, {ended_notice("completed")}
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT jsonb_object_agg(key, jsonb_build_array(request, answer)) FROM known)
                 AS known) AS gate
LEFT JOIN (
    SELECT true AS completion, {LEASE_COLUMNS} FROM completed
    UNION ALL
    SELECT false AS completion, {LEASE_COLUMNS} FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id""",
    )


@statement(_lease_together, ledger=BOTH)
def lease_together(
    *,
    session: str,
    lead_ids: list[int],
    lease_tokens: list[str],
    statuses: list[str],
    results: list[str | None],
    errors: list[str | None],
    item_callers: list[int],
    gated: list[bool],
    keys: list[str | None],
    key_session: str,
    max: int,
    tokens: list[str],
    owners: list[str],
    ttls: list[float],
    callers: list[int],
    slot_keys: list[str | None],
    slot_requests: list[str | None],
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    api_token: str | None = None,
) -> None:
    """The leases of several callers of one session without limits, in one statement (group
    commit), each caller with its own completions first, or none: the completions of
    ``complete_and_lease`` and the keyed leases of ``lease_keyed``, together.

    Item ``j`` completes ``lead_ids[j]`` with its lease token, status, result and error, for
    caller ``item_callers[j]`` (callers count from 1). Caller ``i`` is ``gated[i]`` by its
    completion (a completion with ``next``: it leases only when that completion went
    through) or not (a keyed lease: it leases whatever its items' answers, having none),
    and its key is ``keys[i]`` (NULL: unkeyed; every key of the group is kept under
    ``key_session``, ``idempotency.session_of``). Its slots are those of ``callers`` equal to
    ``i``: each with its new lease token (``tokens``), owner, ttl, key and fingerprint of
    its request. A completion's row locked by another transaction is skipped (another's
    lock holds up not the group). A caller whose key names a request committed before
    leases nothing (``known``: each such key's request and answer, for the caller to hand
    back what it took), and completes nothing when that request was another (``refused``:
    its 422 changes nothing); the slots of the others take the best leads in the callers' order,
    as ``lease_group``'s do, and each keyed caller's leases are stored as its key's answer.
    A completion row is a lead completed (``completion`` true, its lease token the item's),
    a lease row a lead leased (``completion`` false): by lead id and token each caller
    finds its own. A limited session leases nothing here (``limited``: the completions are
    done). One PostgreSQL only: on a cluster each caller goes alone, routed.
    """


def _limited_gate() -> str:
    """The CTE that finds a session with a cap or a rate (``lease_next``, ``lease_group``)."""
    return f"""limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND {LIMITED}
),
"""


def _gated_answer() -> str:
    """Each lead leased, or one row of NULLs; every row says whether the gate held."""
    return f"""SELECT {LEASE_COLUMNS}, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id"""


# Who holds each leased lead, and for how long: one owner and ttl for the whole statement
# (lease_next, lease_limited), or one per slot (lease_group), slot n being the n-th lead.
_ONE_HOLDER = ("%(owner)s", "%(ttl_s)s::float8")


_HOLDER_PER_SLOT = ("(%(owners)s::text[])[n]", "(%(ttls)s::float8[])[n]")


def _lease_group(ledger: bool) -> str:
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=_limited_gate(),
        only_if="AND NOT EXISTS (SELECT FROM limited)",
        limit="%(max)s",
        after="",
        answer=_gated_answer(),
        holder=_HOLDER_PER_SLOT,
    )


@statement(_lease_group, ledger=BOTH)
def lease_group(
    *,
    session: str,
    max: int,
    owners: list[str],
    tokens: list[str],
    ttls: list[float],
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    api_token: str | None = None,
) -> None:
    """``lease_next`` for several callers of one session at once (group commit).

    The same claim, gate and promotion, for ``max`` leads: the sum of the callers' own. The
    leads are numbered in priority order, and lead ``n`` gets slot ``n``'s token, owner
    (``owners``) and ttl (``ttls``): the caller of slots 1 to m1 gets the best leads, the next
    the ones after, so the callers are served in their order as if one came after the other.
    Each ledger row names its lead's owner. A limited session answers one row, ``limited``,
    as ``lease_next`` does.
    """


def _claim_and_lease(
    ledger: bool,
    *,
    clock: str,
    before: str,
    only_if: str,
    limit: str,
    after: str,
    answer: str,
    holder: tuple[str, str] = _ONE_HOLDER,
    picked: str | None = None,
    slotted: bool = False,
) -> str:
    """The body of ``lease_next``, ``lease_limited`` and ``lease_group``: ``before`` (CTEs), the
    claim of up to ``limit`` leads when ``only_if`` holds, the lease, ``after`` (CTEs), then
    ``answer``. The leads are numbered in lease order (``n``, for the token, and the
    ``holder``: owner and ttl expressions). ``clock`` is the SQL for the instant the lease
    is taken at (``NOW``, or ``LOCKED_NOW`` after a lock). ``picked``: how the leads are
    chosen among the candidates (``_KEYED_PICK``); by default the best ``limit``.
    ``slotted``: lead ``n`` goes to row ``n`` of a CTE ``slots`` of ``before`` (its ``n``,
    ``token``, ``owner`` and ``ttl_s``), and leads beyond its last row are not leased.

    A paused session (``_PAUSED``) claims nothing, nor does the lease of a scoped token
    revoked or expired meanwhile (``_REVOKED``); a lead leased gets the end of its
    maximum runtime (``_RUNTIME_S`` after ``clock``), and its lease never lasts past it."""
    owner, ttl = holder
    picked = (
        picked
        or f"""SELECT id, priority FROM {_CANDIDATES}
    ORDER BY priority DESC, id
    LIMIT {limit}"""
    )
    only_if = f"{only_if} {_NOT_PAUSED} {_NOT_REVOKED}"
    ends = plus_seconds(clock, _RUNTIME_S)
    ledger_cte = ledger_rows(
        "leased", "leased", expires_at="lease_expires_at", enabled=ledger, clock=clock
    )
    return f"""
WITH {_PAUSED.format(clock=clock)}{_REVOKED}{before}ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= {clock} {only_if}
    ORDER BY priority DESC, id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= {clock} {only_if}
    ORDER BY available_at
    LIMIT {DUE_PER_LEASE}
    FOR UPDATE SKIP LOCKED
),
picked AS (
    {picked}
),
numbered AS (
    {_SLOTTED if slotted else _NUMBERED.format(owner=owner, ttl=ttl)}
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = {ends},
        lease_expires_at = least({plus_seconds(clock, "numbered.ttl_s")}, {ends}),
        updated_at = {clock}, {logged("leased")}
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
){after}{ledger_cte}
{answer}
"""


_NUMBERED = """-- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, {owner} AS owner, {ttl} AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots"""
_SLOTTED = """SELECT picks.id, slots.token, slots.owner, slots.ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS picks
    JOIN slots ON slots.n = picks.n"""


# -- flow control (docs/contract.md#flow-control): named fragments of the lease statements --

# A session paused now (``paused_until``, on the statement's clock): its leases claim nothing.
_PAUSED = """paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > {clock}
),
"""
_NOT_PAUSED = "AND NOT EXISTS (SELECT FROM paused)"
# A scoped token's lease (``api_token``: the token's hash; NULL for full access) claims
# nothing once the token is revoked or expired, read in the statement that leases: so a
# request that began before (a long poll woken after the revocation, a grouped call) is
# bound by it as one that begins after is, whatever this process's cache of tokens says.
_REVOKED = """revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
"""
_NOT_REVOKED = "AND NOT EXISTS (SELECT FROM revoked)"
# Where the maximum runtime of an attempt leased at ``clock`` ends: the lead's own, else its
# session's default; NULL (no maximum) when neither is set.
_RUNTIME_S = """coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s))"""
# The candidates of a lease: its ready and due leads.
_CANDIDATES = "(SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates"
# A session with max_leased_per_key (``lease_limited``, under the session's lock): its cap.
_CAP = "(SELECT max_leased_per_key FROM settings)"
# Its claim passes over the leads of the keys at their cap (so they hold up no other key),
# counting the keys it meets alone (``held_of_key``): their number follows the leads the
# claim walks, which ``tend_keys`` keeps short (app.store.statements.parking), never the
# keys held in the session ...
_KEY_HAS_ROOM = f"""AND (concurrency_key IS NULL OR {_CAP} IS NULL
           OR {held_of_key("leads.concurrency_key", _CAP)} < {_CAP})"""
# ... and takes, of each key, no more than the room left under the cap (each key the
# candidates have counted once, joined, not once per candidate).
_KEYED_PICK = f"""SELECT ranked.id, ranked.priority FROM (
        SELECT candidates.*, row_number() OVER (
            PARTITION BY candidates.concurrency_key ORDER BY priority DESC, id) AS nth
        FROM {_CANDIDATES}
    ) AS ranked
    LEFT JOIN (
        SELECT k.concurrency_key, {held_of_key("k.concurrency_key", _CAP)} AS n
        FROM (SELECT DISTINCT concurrency_key FROM {_CANDIDATES}
              WHERE concurrency_key IS NOT NULL) AS k
    ) AS k ON k.concurrency_key = ranked.concurrency_key
    WHERE ranked.concurrency_key IS NULL OR {_CAP} IS NULL
       OR ranked.nth + coalesce(k.n, 0) <= {_CAP}
    ORDER BY ranked.priority DESC, ranked.id
    LIMIT {{limit}}"""


def _promote(scoped: bool) -> str:
    return f"""
WITH due AS (
    SELECT id FROM leads
    WHERE scheduled AND available_at <= {NOW} {only_session(scoped)}
    ORDER BY available_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.scheduled {only_session(scoped, "l.session")}
    RETURNING l.session
)
SELECT count(*) AS promoted,
       (SELECT count(pg_notify('{NOTIFY_CHANNEL}', p.session || ' ' || p.n))
        FROM (SELECT session, count(*) AS n FROM promoted GROUP BY session) AS p) AS notified
FROM promoted
"""


@statement(_promote, scoped=BOTH)
def promote(
    *, session: str | None = None, limit: int, now: datetime | None, scoped: bool = False
) -> None:
    """Make up to ``limit`` scheduled leads that came due ready (any session, or one session's
    when scoped); the sweeper's.

    Oldest due first, through ``leads_scheduled_at``; SKIP LOCKED leaves a row
    a lease holds to that lease. Notifies each session of its promoted leads.
    """


def _valid_leases(routed: bool) -> str:
    return f"""
SELECT {qualified(LEAD_COLUMNS)}, l.lease_token, l.runtime_ends_at
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND {VALID_LEASE} {only_session(routed, "l.session")}
ORDER BY l.priority DESC, l.id
"""


@statement(_valid_leases, routed=BOTH)
def valid_leases(
    *,
    ids: list[int],
    tokens: list[str],
    now: datetime | None,
    session: str | None = None,
    routed: bool = False,
) -> None:
    """Those of the given leases (lead id and token) that are still valid, in leasing order.
    ``routed``: they are of ``session`` (their tokens'), so on a cluster the read is that
    session's shard's alone."""


def _lock_settings() -> str:
    return (
        "SELECT max_leased_per_key FROM session_settings "
        f"WHERE session = %(session)s AND {LIMITED} FOR UPDATE"
    )


@statement(_lock_settings)
def lock_settings(*, session: str) -> None:
    """Lock a limited session's settings row, in the transaction of its lease: the session's
    limited leases take turns, each counting what is held after the one before committed.
    Its cap per key (``tend_keys`` runs when there is one); no row back: the session has no
    limits (any more)."""


def _lease_limited(ledger: bool) -> str:
    return _claim_and_lease(
        ledger,
        clock=LOCKED_NOW,
        before=f"""stored AS (
    SELECT {SETTINGS}, tokens, refilled_at FROM session_settings WHERE session = %(session)s
),
settings AS (
    SELECT max_leased, rate_per_s, max_leased_per_key,
           coalesce(burst, greatest(1, ceil(rate_per_s)))::float8 AS burst, tokens,
           greatest(0, {seconds_between("refilled_at", LOCKED_NOW)}) AS elapsed_s
    FROM stored
),
bucket AS (
    -- Full until first drawn. Else its level held to [0, burst] (NaN: full), refilled for
    -- the time since it was drawn, but never for more than twice the time it takes to fill
    -- (a longer quiet time fills it all the same): with the settings in their ranges every
    -- term lies within [0, 2 * burst], and a refill above 0 is at least rate * 1 µs (1e-12),
    -- so double precision carries each one, with no overflow and no underflow.
    SELECT CASE WHEN tokens IS NULL THEN burst
                ELSE least(burst, least(greatest(tokens, 0), burst)
                                  + rate_per_s * least(elapsed_s, 2 * burst / rate_per_s))
           END AS tokens
    FROM settings WHERE rate_per_s IS NOT NULL
),
room AS (
    SELECT (SELECT max_leased FROM settings)::bigint - (
        SELECT coalesce(sum(n), 0) FROM lead_counts
        WHERE session = %(session)s AND status = 'leased')::bigint AS n
),
allowance AS (
    SELECT greatest(0, least(%(max)s, (SELECT n FROM room), (SELECT floor(tokens) FROM bucket)))
        ::int AS n
),
""",
        only_if=_KEY_HAS_ROOM,
        limit="(SELECT n FROM allowance)",
        picked=_KEYED_PICK.format(limit="(SELECT n FROM allowance)"),
        after=f""",
spent AS (
    UPDATE session_settings AS s
    SET tokens = bucket.tokens - (SELECT count(*) FROM leased), refilled_at = {LOCKED_NOW}
    FROM bucket WHERE s.session = %(session)s
)""",
        answer=f"""SELECT {LEASE_COLUMNS}, gate.*
FROM (SELECT (SELECT n FROM room) AS room, (SELECT tokens FROM bucket) AS tokens,
             (SELECT rate_per_s FROM settings) AS rate_per_s) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id""",
    )


@statement(_lease_limited, ledger=BOTH)
def lease_limited(
    *,
    session: str,
    max: int,
    owner: str,
    tokens: list[str],
    ttl_s: float,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    api_token: str | None = None,
) -> None:
    """``lease_next`` for a session with a cap or a rate, run after ``lock_settings``.

    A statement after the lock sees every lease of the session committed before it: the
    leads it holds now (``lead_counts``, an expired lease not yet swept included) and its
    bucket. It leases at most ``max``, the room under ``max_leased`` and the whole tokens
    in the bucket (refilled at ``rate_per_s`` since it was drawn, up to ``burst``), and
    takes one token per lead leased. Each lead leased is a row; none, one row of NULLs;
    every row says ``room`` (leads it could hold more before; NULL without a cap),
    ``tokens`` (the bucket before; NULL without a rate) and ``rate_per_s``, so the caller
    knows what held the session back and when to try it again.
    """
