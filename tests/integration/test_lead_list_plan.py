"""An operator's list of a session's leads and the bulk verbs' batches walk
``leads_session_status_id`` (session, status, id) from the cursor, never the session's every
lead nor a sort of them (docs/operators.md#the-plan-for-a-million-leads has the plans for
1,000,000)."""

from __future__ import annotations

from typing import Any

import pytest

from app.store import statements
from app.store.pool import Database
from app.store.statements import Statement
from leaseq.model import STATUSES
from tests.integration.test_sql_plan import _fill

# Each fills a table with thousands of leads to read a plan: CI runs them, and the README's
# command leaves them out (docs/testing.md).
pytestmark = pytest.mark.slow

NO_FILTER: dict[str, Any] = {
    "key_prefix": None,
    "owner": None,
    "error": None,
    "created_after": None,
    "created_before": None,
    "updated_after": None,
    "updated_before": None,
}
INT64_MAX = 2**63 - 1


async def _plan(db: Database, statement: Statement) -> str:
    explained = await db.rows(f"EXPLAIN {statement.text}", statement.params)
    return "\n".join(row["QUERY PLAN"] for row in explained)


async def test_every_page_walks_the_status_index_from_its_cursor(db: Database) -> None:
    await _fill(db)
    for newest, after in ((True, INT64_MAX), (True, 50_000), (False, 0), (False, 50_000)):
        for statuses, error in ((list(STATUSES), None), (["done"], None), (["queued"], "x")):
            plan = await _plan(
                db,
                statements.list_leads(
                    session="s3",
                    statuses=statuses,
                    after=after,
                    limit=51,
                    newest=newest,
                    **{**NO_FILTER, "error": error},
                ),
            )
            assert "using leads_session_status_id on leads" in plan, plan
            assert "Seq Scan on leads" not in plan and "Bitmap" not in plan, plan


async def test_each_bulk_batch_walks_the_status_index_too(db: Database) -> None:
    await _fill(db)
    common: dict[str, Any] = {"session": "s3", "after": 0, "limit": 1000, "now": None}
    for ledger in (True, False):
        for statement in (
            statements.retry_leads(
                **common, statuses=["failed"], ledger=ledger, by_ids=False, **NO_FILTER
            ),
            statements.cancel_leads(
                **common, statuses=["queued", "leased"], ledger=ledger, by_ids=False, **NO_FILTER
            ),
        ):
            plan = await _plan(db, statement)
            # No failed lead here: the planner may walk the failed leads' own index instead.
            walks = ("leads_session_status_id", "leads_failed_recent on leads")
            assert any(index in plan for index in walks), plan
            assert "Seq Scan on leads" not in plan, plan
        by_ids = statements.cancel_leads(
            **common, statuses=["queued"], ledger=ledger, by_ids=True, ids=[1, 2, 3], **NO_FILTER
        )
        assert "Seq Scan on leads" not in await _plan(db, by_ids)
