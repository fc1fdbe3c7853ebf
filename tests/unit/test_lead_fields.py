"""A lead's fields are listed once, by the client's ``Lead``: the columns the statements
select, the API's model and the client's parser all follow it."""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest

from app.api.schemas import LeadOut
from app.store.statements import LEAD_COLUMNS
from leaseq._wire import parse_lead
from leaseq.model import Lead

NAMES = [field.name for field in fields(Lead)]
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def a_lead(**changes: object) -> Lead:
    values: dict[str, object] = {
        "id": 7,
        "session": "s",
        "priority": -3,
        "payload": {"a": [1, 2]},
        "key": "k",
        "status": "leased",
        "owner": "w",
        "attempts": 2,
        "max_attempts": 5,
        "available_at": AT,
        "lease_expires_at": AT,
        "result": None,
        "error": None,
        "created_at": AT,
        "updated_at": AT,
        "depth": 1,
        "parent_id": 3,
        "checkpoint": {"step": 4},
    }
    values.update(changes)
    return Lead(**values)  # type: ignore[arg-type]


def test_the_statements_select_the_fields_of_lead_in_order() -> None:
    assert [name.strip() for name in LEAD_COLUMNS.split(",")] == NAMES


def test_the_api_model_has_the_fields_of_lead_in_order_all_required() -> None:
    assert list(LeadOut.model_fields) == NAMES
    assert all(field.is_required() for field in LeadOut.model_fields.values())


@pytest.mark.parametrize("lead", [a_lead(), a_lead(key=None, lease_expires_at=None, owner=None)])
def test_the_client_reads_back_what_the_api_writes(lead: Lead) -> None:
    assert parse_lead(LeadOut.of(lead).model_dump(mode="json")) == lead


def test_the_client_reads_a_lead_an_older_service_wrote_with_fewer_fields() -> None:
    written = LeadOut.of(a_lead()).model_dump(mode="json")
    for name in ("priority", "depth", "attempts", "key", "checkpoint", "payload"):
        del written[name]
    read = parse_lead(written)
    assert (read.priority, read.depth, read.attempts) == (0, 0, 0)
    assert (read.key, read.checkpoint, read.payload) == (None, None, {})
    with pytest.raises(KeyError):
        parse_lead({name: value for name, value in written.items() if name != "status"})
