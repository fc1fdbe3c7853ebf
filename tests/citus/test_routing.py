"""Every statement docs/scaling.md calls session-scoped, and the lead-scoped ones routed by
their token's session or by the session found for their lead, runs on one shard of the
cluster: each ``Task Count`` of its plan is 1. With the ledger on, Citus plans a
statement's CTEs one by one (``Distributed Subplan``), each still on the session's shard
alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from app.store.statements import text
from tests.deploy.test_scaling import PARAMETERS, SESSION_SCOPED

# Renew, complete, release and a completion with next, by lead id and the session their
# tokens carry (app.domain.lease_tokens).
ROUTED: dict[str, Callable[[], str]] = {
    f"{name}{', grouped' if skip else ''}{', ledger off' if not ledger else ''}": (
        lambda name=name, skip=skip, ledger=ledger: text(  # type: ignore[misc]
            name,
            skip_locked=skip,
            routed=True,
            **({"ledger": ledger, "lean": True} if name == "complete_many" else {}),
        )
    )
    for name in ("renew_many", "complete_many")
    for skip in (True, False)
    for ledger in ((True, False) if name == "complete_many" else (True,))
}
ROUTED |= {
    f"release{', ledger off' if not ledger else ''}": (
        lambda ledger=ledger: text("release", ledger=ledger, routed=True)  # type: ignore[misc]
    )
    for ledger in (True, False)
}
# A completion with next whose lease is of the next lease's session (the common case), as a
# cluster sends it: a keyed one without its key's row (``remember`` off), which
# ``remember_key`` writes after it in the same transaction.
ROUTED |= {
    f"complete_and_lease{', keyed' if keyed else ''}{', ledger off' if not ledger else ''}": (
        lambda ledger=ledger, keyed=keyed: text(  # type: ignore[misc]
            "complete_and_lease", ledger=ledger, keyed=keyed, routed=True, remember=False
        )
    )
    for ledger in (True, False)
    for keyed in (False, True)
}
# By lead id alone, once the lead's session is found node by node (lead_sessions_on_nodes):
# an operator's or a producer's read or change of one lead.
ROUTED |= {
    "get": lambda: text("get", routed=True),
    "cancel": lambda: text("cancel", ledger=True, routed=True),
    "cancel, ledger off": lambda: text("cancel", ledger=False, routed=True),
    "retry": lambda: text("retry", ledger=True, routed=True),
    "retry, ledger off": lambda: text("retry", ledger=False, routed=True),
}
# What a worker's call reads on the refused path (a completion or a keyed lease sent again, a
# renewal refused at its maximum runtime), by the session its tokens carry.
ROUTED |= {
    "completed_already": lambda: text("completed_already", lean=False, routed=True),
    "runtime_ran_out": lambda: text("runtime_ran_out", routed=True),
    "valid_leases": lambda: text("valid_leases", routed=True),
}
EXTRA: dict[str, Any] = {
    "items": [0],
    "checkpoints": [None],
    "statuses": ["done"],
    "results": [None],
    "errors": [None],
    "delay_s": 0.0,
    "throttle_s": None,
    "unstarted": False,
}


def _task_counts(url: str, statement: str) -> list[int]:
    params = {**PARAMETERS, **EXTRA}
    with psycopg.connect(url) as conn:
        plan = [row[0] for row in conn.execute(f"EXPLAIN {statement}", params)]
        conn.rollback()
    return [int(line.split(":")[1]) for line in plan if "Task Count:" in line]


@pytest.mark.parametrize("name", [*SESSION_SCOPED, *ROUTED])
def test_the_statement_runs_on_one_shard(citus_url: str, name: str) -> None:
    build = SESSION_SCOPED.get(name) or ROUTED[name]
    counts = _task_counts(citus_url, build())
    assert counts and set(counts) == {1}, counts
