"""An operator's lists of a session's leads, and the verbs acted on many of them at once.

Every statement here reads one session (so on a Citus cluster it is routed to that session's
shard alone) and walks the index ``leads_session_status_id`` (``session, status, id``) once
per status asked for: each walk is in id order from the cursor, so a page reads at most
``limit`` rows a status that pass its filters, and never sorts the session.

A filter's fields are bound parameters, NULL for "any" (``%(owner)s::text IS NULL OR …``):
one text whatever the filter, the index conditions the same in every plan. The error text is
matched with ``strpos`` on ``lower()`` (a case-insensitive substring; no ``LIKE`` pattern, so
``%`` and ``_`` in it are plain characters), the key by ``starts_with``.

The bulk verbs (``retry_leads``, ``cancel_leads``) act on one batch per statement: the
batch is picked in id order after ``after`` (the last batch's last id, so a call never
picks a lead twice), locked in id order (two bulk calls meet no lock in a cycle), and
changed by an UPDATE whose WHERE re-checks the status and the whole filter on the locked
row: a lead that moved meanwhile (leased, completed, retried by someone else) is left as it
is and not counted. The SET clauses and ledger rows are those of ``cancel`` and ``retry``.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import (
    LEAD_COLUMNS,
    ledger_rows,
    notify,
    qualified,
)
from app.store.statements.leads import _requeue_failed, cancelled_set
from app.store.statements.outcomes import ended_notice


def matches(alias: str) -> str:
    """The filter's conditions other than session and status, on the row ``alias``."""
    a = f"{alias}."
    return f"""(%(key_prefix)s::text IS NULL OR starts_with({a}key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR {a}owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower({a}error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR {a}created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR {a}created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR {a}updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR {a}updated_at < %(updated_before)s)"""


def _list_leads(newest: bool) -> str:
    order, past = ("DESC", "<") if newest else ("ASC", ">")
    # The walks pick ids alone, so without other filters each is an index-only scan of
    # leads_session_status_id; and the cursor is a row comparison on (status, id), which that
    # index serves and the primary key cannot, so no plan walks the primary key by id instead,
    # filtering session and status on the heap: that walk would read every lead of the
    # session to find none of a status it has none of.
    return f"""
SELECT {qualified(LEAD_COLUMNS)} FROM (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) {past} (s.status, %(after)s)
          AND {matches("l")}
        ORDER BY l.id {order}
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id {order}
    LIMIT %(limit)s
) AS page
JOIN leads AS l ON l.id = page.id AND l.session = %(session)s
ORDER BY l.id {order}
"""


@statement(_list_leads, newest=BOTH)
def list_leads(
    *,
    session: str,
    statuses: list[str],
    after: int,
    limit: int,
    newest: bool,
    key_prefix: str | None = None,
    owner: str | None = None,
    error: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
) -> None:
    """Up to ``limit`` leads of a session in ``statuses`` that pass the filter, by id from
    ``after`` (excluded): descending when ``newest``, else ascending. One walk of
    ``leads_session_status_id`` per status, each stopped at ``limit`` rows, merged; then
    the page's rows by id. A lead changed between the two reads of the one statement is
    shown as it is after the change (the snapshot is the statement's)."""


def _picked(by_ids: bool) -> str:
    """The CTE ``picked``: the next batch's ids, and ``locked``: those rows, locked in id
    order."""
    if by_ids:
        source = """
    SELECT l.id FROM leads AS l
    WHERE l.id = ANY(%(ids)s::bigint[]) AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[]) AND l.id > %(after)s
    ORDER BY l.id
    LIMIT %(limit)s"""
    else:
        source = f"""
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND {matches("l")}
        ORDER BY l.id
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id
    LIMIT %(limit)s"""
    return f"""
WITH picked AS MATERIALIZED ({source}
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
)"""


def _recheck() -> str:
    """The UPDATE's WHERE: the locked row still of the session, in a status the verb applies
    to, among the ids (when given) and passing the filter."""
    return f"""l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND {matches("l")}"""


def _batch_answer(changed_name: str) -> str:
    return f"""SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM {changed_name}) AS changed"""


def _retry_leads(ledger: bool, by_ids: bool) -> str:
    return f"""{_picked(by_ids)},
retried AS (
    UPDATE leads AS l
    SET {_requeue_failed("l.")}
    FROM locked
    WHERE {_recheck()}
    RETURNING l.*
){ledger_rows("retried", "retried", enabled=ledger)},
woken AS (
    SELECT {notify("%(session)s || ' ' || count(*)")} AS notified
    FROM retried HAVING count(*) > 0
)
{_batch_answer("retried")}, (SELECT notified FROM woken) AS notified
"""


@statement(_retry_leads, ledger=BOTH, by_ids=BOTH)
def retry_leads(
    *,
    session: str,
    statuses: list[str],
    after: int,
    limit: int,
    now: datetime | None,
    ledger: bool,
    by_ids: bool,
    ledger_by_row: bool = False,
    ids: list[int] | None = None,
    key_prefix: str | None = None,
    owner: str | None = None,
    error: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
) -> None:
    """Dead-letter replay of one batch of a session's failed leads, as ``retry`` of each:
    those among ``ids`` (``by_ids``) or those the filter selects, at most ``limit``, after
    id ``after``. Answers ``picked`` (the batch's size: the caller goes on while it is
    full), ``last_id`` (where the next batch starts) and ``changed``."""


def _cancel_leads(ledger: bool, by_ids: bool) -> str:
    return f"""{_picked(by_ids)},
cancelled AS (
    UPDATE leads AS l
    SET {cancelled_set()}
    FROM locked
    WHERE {_recheck()}
    RETURNING l.*
){ledger_rows("cancelled", "cancelled", enabled=ledger)}
{_batch_answer("cancelled")}, {ended_notice("cancelled")}
"""


@statement(_cancel_leads, ledger=BOTH, by_ids=BOTH)
def cancel_leads(
    *,
    session: str,
    statuses: list[str],
    after: int,
    limit: int,
    now: datetime | None,
    ledger: bool,
    by_ids: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    ids: list[int] | None = None,
    key_prefix: str | None = None,
    owner: str | None = None,
    error: str | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    updated_after: datetime | None = None,
    updated_before: datetime | None = None,
) -> None:
    """An operator fails one batch of a session's queued and leased leads, as ``cancel`` of
    each (a holder's next renew or complete loses): those among ``ids`` or those the filter
    selects, at most ``limit``, after id ``after``; answers as ``retry_leads``."""
