"""An operator's view of a session's leads: listed a page at a time, and retried or
cancelled many at once (docs/contract.md#operators-lists-of-leads).

A list is filtered (``LeadFilter``: statuses, key prefix, owner, error text, created and
updated ranges) and ordered by id, newest or oldest first. Its cursor is the last id shown
with a digest of the session, order and filter it belongs to, so a page is read from the
index from where the last one stopped: leads pushed while an operator pages through are
never shown twice, and none that existed when the first page was read is skipped. A cursor
given with another query or session is refused, as is one that was never made here.

The bulk verbs take ids (at most ``MAX_IDS``) or a filter, and act in batches of
``BULK_BATCH``, one statement each (``app.store.statements.listing``), so no statement holds
many row locks for long and none runs into a statement timeout; a call stops after
``MAX_CHANGED`` leads and says ``more``, and the caller calls again. Each change re-checks
the lead's status and the filter in its own WHERE, and writes the ledger row the one-by-one
verb writes. Knows nothing of HTTP.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from app.domain import validation
from app.domain.queue import Queue, lead_of
from app.store import statements as sql
from leaseq.checks import storable
from leaseq.errors import InvalidInput
from leaseq.limits import INT64_MAX, MAX_KEY_CHARS, MAX_OWNER_CHARS
from leaseq.model import STATUSES, Lead, Status

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_IDS = 1000  # ids named in one bulk call
MAX_CHANGED = 10_000  # leads one bulk call acts on at most
BULK_BATCH = 1000  # leads one statement of a bulk call acts on at most

Order = Literal["newest", "oldest"]
ORDERS: tuple[Order, ...] = ("newest", "oldest")
Verb = Literal["retry", "cancel"]
# The statuses each bulk verb applies to, as its one-by-one verb does.
APPLIES_TO: Mapping[Verb, tuple[Status, ...]] = {
    "retry": ("failed",),
    "cancel": ("queued", "leased"),
}
RANGES = ("created_after", "created_before", "updated_after", "updated_before")
# The longest error text searched for: a needle, not a haystack (and within a query string).
MAX_ERROR_SEARCH_CHARS = 1000


@dataclass(frozen=True, slots=True)
class LeadFilter:
    """Which leads of a session: any of ``statuses`` (empty: any status), a dedupe key that
    starts with ``key_prefix``, held or last held by ``owner``, an error that contains
    ``error`` in any case, created and updated in ``[after, before)``. None: any."""

    statuses: tuple[Status, ...] = ()
    key_prefix: str | None = None
    owner: str | None = None
    error: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    # A text field no lead can hold (a NUL character, a lone surrogate): nothing matches.
    matches_nothing: bool = False

    def params(self) -> dict[str, Any]:
        """The statements' filter parameters, the statuses apart."""
        return {
            "key_prefix": self.key_prefix,
            "owner": self.owner,
            "error": self.error,
            **{name: getattr(self, name) for name in RANGES},
        }

    def digest(self, session: str, order: str) -> str:
        """What a cursor is bound to: this filter, the session and the order."""
        named = {
            "session": session,
            "order": order,
            "statuses": sorted(self.statuses),
            **{
                name: value.isoformat() if isinstance(value, datetime) else value
                for name, value in self.params().items()
            },
        }
        text = json.dumps(named, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _instant(field: str, value: Any) -> datetime | None:
    """An RFC 3339 instant, with its offset (a time without one names no instant)."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidInput(field, "must be an RFC 3339 date-time") from None
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise InvalidInput(field, "must be an RFC 3339 date-time with its offset (…Z)")
    return value


def _text(field: str, value: Any, max_chars: int) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > max_chars:
        raise InvalidInput(field, f"must be a string of at most {max_chars} characters")
    return value


def lead_filter(
    *,
    status: Iterable[Any] | None = None,
    key_prefix: Any = None,
    owner: Any = None,
    error: Any = None,
    created_after: Any = None,
    created_before: Any = None,
    updated_after: Any = None,
    updated_before: Any = None,
) -> LeadFilter:
    """A checked filter from its fields as a query or a body gives them (a blank field is
    none). Raises InvalidInput."""
    statuses: list[Status] = []
    for value in status or ():
        if value not in STATUSES:
            raise InvalidInput("status", f"must be one of {', '.join(STATUSES)}")
        if value not in statuses:
            statuses.append(value)
    texts = {
        "key_prefix": _text("key_prefix", key_prefix, MAX_KEY_CHARS),
        "owner": _text("owner", owner, MAX_OWNER_CHARS),
        "error": _text("error", error, MAX_ERROR_SEARCH_CHARS),
    }
    unstorable = any(text is not None and not storable(text) for text in texts.values())
    found = LeadFilter(
        statuses=tuple(statuses),
        **{name: None if unstorable else text for name, text in texts.items()},
        matches_nothing=unstorable,
        created_after=_instant("created_after", created_after),
        created_before=_instant("created_before", created_before),
        updated_after=_instant("updated_after", updated_after),
        updated_before=_instant("updated_before", updated_before),
    )
    return found


@dataclass(frozen=True, slots=True)
class LeadPage:
    """One page; ``next_cursor`` is None on the last."""

    leads: list[Lead]
    next_cursor: str | None


def _cursor(last_id: int, digest: str) -> str:
    raw = json.dumps({"id": last_id, "q": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _from_cursor(cursor: str, digest: str) -> int:
    """The last id a cursor of this query showed. Raises InvalidInput."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        named = json.loads(raw)
        last_id, of = named["id"], named["q"]
    except (ValueError, TypeError, KeyError, binascii.Error):
        raise InvalidInput("cursor", "is not a cursor this service made") from None
    if not isinstance(last_id, int) or isinstance(last_id, bool) or not 0 <= last_id <= INT64_MAX:
        raise InvalidInput("cursor", "is not a cursor this service made")
    if of != digest:
        raise InvalidInput("cursor", "belongs to another query or session: start again without")
    return last_id


async def list_leads(
    queue: Queue,
    session: str,
    which: LeadFilter,
    *,
    order: str = "newest",
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> LeadPage:
    """A page of the session's leads that ``which`` selects, in ``order`` by id, from
    ``cursor`` (None: the first page). Raises InvalidInput."""
    validation.session(session)
    if order not in ORDERS:
        raise InvalidInput("order", "must be newest or oldest")
    limit = validation.integer("limit", limit, low=1, high=MAX_LIMIT)
    newest = order == "newest"
    digest = which.digest(session, order)
    after = INT64_MAX if newest else 0
    if cursor:
        after = _from_cursor(cursor, digest)
    if which.matches_nothing:
        return LeadPage([], None)
    rows = await queue.db.rows(
        sql.list_leads(
            session=session,
            statuses=list(which.statuses or STATUSES),
            after=after,
            limit=limit + 1,  # one more says whether a next page exists
            newest=newest,
            **which.params(),
        )
    )
    leads = [lead_of(row) for row in rows[:limit]]
    more = len(rows) > limit
    return LeadPage(leads, _cursor(leads[-1].id, digest) if more else None)


@dataclass(frozen=True, slots=True)
class Bulk:
    """What a bulk verb changed; ``more``: it stopped at ``MAX_CHANGED`` with leads the filter
    selects perhaps left, so the caller calls again."""

    changed: int
    more: bool


def lead_ids(values: Any) -> list[int]:
    """1 to ``MAX_IDS`` lead ids, each once. Raises InvalidInput."""
    if not isinstance(values, Sequence) or isinstance(values, str) or not values:
        raise InvalidInput("ids", f"must be a list of 1 to {MAX_IDS} lead ids")
    validation.batch("ids", values, high=MAX_IDS)
    return sorted({validation.lead_id(value, f"ids[{i}]") for i, value in enumerate(values)})


async def act(
    queue: Queue,
    verb: Verb,
    session: str,
    *,
    ids: Sequence[int] | None = None,
    which: LeadFilter | None = None,
    now: datetime | None = None,
    batch: int = BULK_BATCH,
) -> Bulk:
    """``verb`` (retry or cancel) on the session's leads among ``ids``, or those ``which``
    selects, that are in a status it applies to; the others are left and not counted.
    Raises InvalidInput."""
    validation.session(session)
    if (ids is None) == (which is None):
        raise InvalidInput("body", "give ids or filter, one of the two")
    chosen = lead_ids(ids) if ids is not None else None
    which = which or LeadFilter()
    applies = APPLIES_TO[verb]
    statuses = [s for s in applies if not which.statuses or s in which.statuses]
    if not statuses or which.matches_nothing:
        return Bulk(0, False)
    size = min(batch, len(chosen)) if chosen is not None else batch
    changed, picked_total, after = 0, 0, 0
    while True:
        common: dict[str, Any] = {
            "session": session,
            "statuses": statuses,
            "after": after,
            "limit": size,
            "now": now,
            "ledger": queue.ledger_in_statement,
            "ledger_by_row": queue.ledger_by_row,
            "by_ids": chosen is not None,
            "ids": chosen,
            **which.params(),
        }
        if verb == "retry":
            statement = sql.retry_leads(**common)
        else:
            statement = sql.cancel_leads(**common, notify_ended=queue.notify_ended)
        [row] = await queue.db.rows(statement)
        picked = int(row["picked"])
        changed += int(row["changed"])
        picked_total += picked
        if picked < size or chosen is not None:
            return Bulk(changed, False)
        if picked_total >= MAX_CHANGED:
            return Bulk(changed, True)
        after = int(row["last_id"])
