"""Where the database runs: one PostgreSQL, or a Citus cluster and what it distributes.

The statements a verb sends depend on it (docs/scaling.md, "How the service learns where it
runs"): on a cluster every call of one session names that session, so Citus routes it to
the session's shard from the first request on; on one PostgreSQL nothing needs to. So the
service reads it from the catalog when it connects, before any statement of the queue
runs, never from what the database refuses: a statement Citus accepts across shards runs
through every shard and is never refused.

``read`` asks the node the pool connects to: whether the ``citus`` extension is there,
which tables it distributes by hash (``pg_dist_partition``), and its primary nodes
(``pg_dist_node``). All three are the node's own catalog, so a stopped worker node does
not keep them from being read. ``app.store.pool.Database`` keeps the answer, reads it again
after a failed connection attempt and every ``RECHECK_S``, and logs it when it changes.

Knows nothing of the queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

RECHECK_S = 30.0  # a node added or removed while the service runs is followed by then

_CITUS = "SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus') AS citus"
# The tables distributed by hash (not the reference tables, partmethod 'n'), and the
# primary nodes, active or not (a node an operator disabled is still where its shards are).
_CLUSTER = """
SELECT ARRAY(SELECT c.relname::text FROM pg_dist_partition AS p
             JOIN pg_class AS c ON c.oid = p.logicalrelid
             WHERE p.partmethod = 'h' ORDER BY 1) AS distributed,
       ARRAY(SELECT nodename || ':' || nodeport FROM pg_dist_node
             WHERE noderole = 'primary' ORDER BY nodeid) AS nodes
"""


@dataclass(frozen=True, slots=True)
class Topology:
    """What the service connects to. ``sharded``: ``leads`` is distributed by session, so
    the queue's statements name the session of every call (docs/scaling.md)."""

    citus: bool
    distributed: frozenset[str] = frozenset()
    nodes: tuple[str, ...] = ()

    @property
    def sharded(self) -> bool:
        return "leads" in self.distributed

    def describe(self) -> str:
        """One line for the log."""
        if not self.citus:
            return "one PostgreSQL"
        if not self.sharded:
            return "a Citus node whose leads are not distributed (run leaseq db upgrade)"
        return (
            f"a Citus cluster: {len(self.distributed)} distributed tables "
            f"({', '.join(sorted(self.distributed))}); nodes {', '.join(self.nodes) or 'none'}"
        )


ONE_POSTGRESQL = Topology(citus=False)


async def read(conn: psycopg.AsyncConnection[Any]) -> Topology:
    """The topology as the catalog of ``conn``'s node tells it: two reads of that node's
    own tables, none of another node."""
    cursor = await conn.execute(_CITUS)
    row = await cursor.fetchone()
    if row is None or not _column(row, "citus", 0):
        return ONE_POSTGRESQL
    cursor = await conn.execute(_CLUSTER)
    row = await cursor.fetchone()
    assert row is not None
    return Topology(
        citus=True,
        distributed=frozenset(_column(row, "distributed", 0) or ()),
        nodes=tuple(_column(row, "nodes", 1) or ()),
    )


def _column(row: Any, name: str, position: int) -> Any:
    """A column of a row, whichever row factory the connection has (dicts or tuples)."""
    return row[name] if isinstance(row, dict) else row[position]
