"""A lead's ``after`` on the wire: the client sends ids and keys as the API takes them, and
reads a lead object without ``after`` (an older service's) as waiting on nothing."""

from __future__ import annotations

from app.api.schemas import LeadOut
from leaseq._wire import new_lead_body, parse_lead
from leaseq.model import NewLead
from tests.unit.test_lead_fields import a_lead


def test_the_client_sends_after_as_given_and_nothing_when_empty() -> None:
    assert new_lead_body(NewLead({}, after=[3, {"key": "k"}]))["after"] == [3, {"key": "k"}]
    assert "after" not in new_lead_body(NewLead({}))


def test_a_lead_object_without_after_waits_on_nothing() -> None:
    written = LeadOut.of(a_lead(after=[1, 2])).model_dump(mode="json")
    assert parse_lead(written).after == [1, 2]
    del written["after"]
    assert parse_lead(written).after == []
