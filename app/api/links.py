"""OpenAPI links: how the answer of one call feeds the next (push → lease → renew → complete).

They document a lead's life in ``/openapi.json`` and let a stateful fuzzer
(tests/api/test_fuzz.py::test_lead_lives_that_follow_the_links) follow it with
real ids and tokens. Links name their target by its operationId, looked up in
the document itself (``app.api.openapi`` puts them in), so they follow the routes.
"""

from __future__ import annotations

from typing import Any

# The lease a lease answer handed out first: what renew, complete, release and GET take.
_LEASED = {
    "lead_id": "$response.body#/leases/0/lead/id",
    "token": "$response.body#/leases/0/token",
}
# The lease a renew or complete request named (its answer does not repeat it).
_RENEWED = {"lead_id": "$request.body#/lead_id", "token": "$request.body#/token"}

# (path, method, status) of the source → {link name: (target path, target method, link)}.
LINKS: dict[tuple[str, str, str], dict[str, tuple[str, str, dict[str, Any]]]] = {
    ("/sessions/{session}/leads", "post", "201"): {
        "LeaseFromThisSession": (
            "/lease",
            "post",
            {"requestBody": {"session": "$request.path.session", "owner": "linked"}},
        ),
        "GetTheFirstLead": (
            "/leads/{lead_id}",
            "get",
            {"parameters": {"lead_id": "$response.body#/ids/0"}},
        ),
        "StatsOfThisSession": (
            "/sessions/{session}/stats",
            "get",
            {"parameters": {"session": "$request.path.session"}},
        ),
    },
    ("/lease", "post", "200"): {
        "RenewTheLease": ("/renew", "post", {"requestBody": _LEASED}),
        "CompleteTheLease": ("/complete", "post", {"requestBody": _LEASED}),
        "ReleaseTheLease": ("/release", "post", {"requestBody": _LEASED}),
        "GetTheLeasedLead": (
            "/leads/{lead_id}",
            "get",
            {"parameters": {"lead_id": "$response.body#/leases/0/lead/id"}},
        ),
    },
    ("/renew", "post", "200"): {
        "CompleteTheRenewedLease": ("/complete", "post", {"requestBody": _RENEWED}),
        "ReleaseTheRenewedLease": ("/release", "post", {"requestBody": _RENEWED}),
    },
    ("/complete", "post", "200"): {
        "CompleteAgain": ("/complete", "post", {"requestBody": _RENEWED}),
        "RetryTheLead": (
            "/leads/{lead_id}/retry",
            "post",
            {"parameters": {"lead_id": "$response.body#/lead/id"}},
        ),
    },
}


def add_links(document: dict[str, Any]) -> dict[str, Any]:
    """Put ``LINKS`` into an OpenAPI document (in place); returns it."""
    paths = document["paths"]
    for (path, method, status), links in LINKS.items():
        answer = paths[path][method]["responses"][status]
        answer["links"] = {
            name: {"operationId": paths[target][verb]["operationId"], **link}
            for name, (target, verb, link) in links.items()
        }
    return document
