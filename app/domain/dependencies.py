"""Dependencies of a push (docs/contract.md#dependencies): the leads each one names in
``after``, resolved to ids of its session, and the edges written with the push.

Resolved before anything is written: an id must be a lead of the session; a key, the key
of a lead of the session or of a lead earlier in the same call (so no cycle can be named);
a lead may not name itself. Anything else raises InvalidInput and the push writes nothing.
The statements are ``app.store.statements.dependencies``; this module knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.domain import validation
from app.store import statements
from app.store.pool import Connection, execute
from leaseq.errors import InvalidInput
from leaseq.model import NewLead


@dataclass(frozen=True, slots=True)
class Wanted:
    """What the leads of one push name: per position, its references (ids as ints, keys as
    strs); empty when no lead names any."""

    refs: dict[int, list[int | str]]

    @classmethod
    def of(cls, leads: Sequence[NewLead]) -> Wanted:
        return cls(
            {
                i: validation.after(lead.after, f"leads[{i}].after")
                for i, lead in enumerate(leads)
                if lead.after
            }
        )


@dataclass(frozen=True, slots=True)
class Resolved:
    """Each reference as the id of a lead already there (``int``) or the position of an
    earlier lead of the call (``Earlier``); and the positions with dependents."""

    targets: dict[int, list[int | Earlier]]
    parents: frozenset[int]  # positions of the call that some later lead waits on


@dataclass(frozen=True, slots=True)
class Earlier:
    position: int


async def resolve(
    conn: Connection, session: str, leads: Sequence[NewLead], wanted: Wanted
) -> Resolved:
    """The references of ``wanted``, checked against the session. Raises InvalidInput."""
    ids = sorted({ref for refs in wanted.refs.values() for ref in refs if isinstance(ref, int)})
    keys = sorted({ref for refs in wanted.refs.values() for ref in refs if isinstance(ref, str)})
    rows = await execute(conn, statements.dependency_targets(session=session, ids=ids, keys=keys))
    known_ids = {row["id"] for row in rows}
    by_key = {row["key"]: row["id"] for row in rows if row["key"] is not None}
    first_at: dict[str, int] = {}
    for i, lead in enumerate(leads):
        if lead.key is not None:
            first_at.setdefault(lead.key, i)
    targets: dict[int, list[int | Earlier]] = {}
    parents: set[int] = set()
    for i, refs in wanted.refs.items():
        own = leads[i].key
        resolved: list[int | Earlier] = []
        for j, ref in enumerate(refs):
            field = f"leads[{i}].after[{j}]"
            if isinstance(ref, int):
                if ref not in known_ids:
                    raise InvalidInput(field, f"no lead {ref} in session {session}")
                resolved.append(ref)
            elif ref == own:
                raise InvalidInput(field, "a lead cannot wait on itself")
            elif ref in by_key:
                resolved.append(by_key[ref])
            elif first_at.get(ref, i) < i:
                resolved.append(Earlier(first_at[ref]))
                parents.add(first_at[ref])
            else:
                raise InvalidInput(
                    field,
                    f"no lead with key {ref!r} in session {session} nor earlier in this push "
                    "(a later lead would make a cycle)",
                )
        targets[i] = resolved
    return Resolved(targets, frozenset(parents))


async def add(
    conn: Connection,
    session: str,
    resolved: Resolved,
    ids: Sequence[int],
    inserted: set[int],
    now: datetime | None,
    *,
    ledger: bool,
    ledger_by_row: bool,
    sharded: bool = False,
) -> None:
    """The edges of the leads the push inserted (a duplicate's ``after`` is not its own:
    the lead already there stands), written in the push's transaction. ``sharded`` (a
    Citus cluster): the edges by ``add_edges`` statements before ``add_dependencies``, so
    that each is a router statement of the session (``statements.add_dependencies``)."""
    lead_ids: list[int] = []
    after_ids: list[int] = []
    for i, targets in resolved.targets.items():
        if ids[i] not in inserted:
            continue
        for target in targets:
            lead_ids.append(ids[i])
            after_ids.append(ids[target.position] if isinstance(target, Earlier) else target)
    if not lead_ids:
        return
    if sharded:  # first: a child failed at once fails its own dependents through them
        await _add_edges(conn, session, list(dict.fromkeys(zip(lead_ids, after_ids, strict=True))))
    await execute(
        conn,
        statements.add_dependencies(
            session=session,
            lead_ids=lead_ids,
            after_ids=after_ids,
            now=now,
            ledger=ledger,
            ledger_by_row=ledger_by_row,
            edges=not sharded,
        ),
    )


async def _add_edges(conn: Connection, session: str, edges: list[tuple[int, int]]) -> None:
    """``edges`` (each lead id with the id it waits on, no two the same) by ``add_edges``
    statements of a power of two rows each."""
    while edges:
        size = min(statements.ADD_EDGES_MAX, 1 << (len(edges).bit_length() - 1))
        chunk, edges = edges[:size], edges[size:]
        await execute(
            conn,
            statements.add_edges(
                session=session,
                lead_ids=[lead for lead, _ in chunk],
                after_ids=[after for _, after in chunk],
                rows=size,
            ),
        )
