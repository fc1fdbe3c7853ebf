"""The router's index (app/api/route_index.py) answers exactly what the router's search answers.

The index hands a request for a path without parameters straight to its route. These
tests send the same requests, hostile bodies among them, with the index and with the
router's search alone, and compare the answers and the database; and they check that
the index keeps only the routes the search would pick, and follows changes to the
route table.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI

from app.api import route_index
from app.api.app import create_app
from app.api.front_door import FrontDoorRoute
from app.config import Settings
from tests.api.test_hostile_bodies import HOSTILE, state

WORKER_ROUTES = [
    ("POST", "/lease"),
    ("POST", "/renew"),
    ("POST", "/renew/batch"),
    ("POST", "/complete"),
    ("POST", "/complete/batch"),
    ("POST", "/release"),
]


def leaseq_app() -> FastAPI:
    return create_app(Settings(database_url="postgresql://unused"))


def test_every_worker_route_is_in_the_index() -> None:
    app = leaseq_app()
    index = app.router.middleware_stack
    assert isinstance(index, route_index.RouteIndex)
    table = index.entries()
    for key in WORKER_ROUTES:
        assert key in table, key
        assert table[key].route.path == key[1]


def test_no_route_with_path_parameters_is_in_the_index() -> None:
    table = route_index.build(leaseq_app().router)
    assert table
    assert all("{" not in path for _, path in table)


def _toy(*routers: APIRouter) -> FastAPI:
    app = FastAPI()
    for router in routers:
        app.include_router(router)
    route_index.install(app)
    return app


def test_a_static_path_the_search_gives_to_an_earlier_route_is_left_out() -> None:
    first, second = APIRouter(route_class=FrontDoorRoute), APIRouter(route_class=FrontDoorRoute)

    @first.get("/{anything}")
    async def anything(anything: str) -> dict[str, str]:
        return {"route": "parameter"}

    @second.get("/fixed")
    async def fixed() -> dict[str, str]:
        return {"route": "fixed"}

    @second.post("/fixed")
    async def posted() -> dict[str, str]:
        return {"route": "posted"}

    table = route_index.build(_toy(first, second).router)
    assert ("GET", "/fixed") not in table  # the search stops at /{anything}
    assert ("POST", "/fixed") in table  # /{anything} takes GET only


async def _get(app: FastAPI, path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path)


async def test_a_route_added_after_the_index_was_built_is_served() -> None:
    router = APIRouter(route_class=FrontDoorRoute)

    @router.get("/one")
    async def one() -> dict[str, int]:
        return {"n": 1}

    app = _toy(router)
    assert (await _get(app, "/one")).json() == {"n": 1}
    assert (await _get(app, "/two")).status_code == 404
    later = APIRouter(route_class=FrontDoorRoute)

    @later.get("/two")
    async def two() -> dict[str, int]:
        return {"n": 2}

    app.include_router(later)
    assert (await _get(app, "/two")).json() == {"n": 2}
    index = app.router.middleware_stack
    assert isinstance(index, route_index.RouteIndex)
    assert ("GET", "/two") in index.entries()


def _answer(response: httpx.Response) -> tuple[Any, ...]:
    headers = {k: v for k, v in response.headers.items() if k not in {"date", "content-length"}}
    return response.status_code, headers, response.content


async def _both(client: httpx.AsyncClient, method: str, path: str, **kwargs: Any) -> list[Any]:
    """The answer with the index, then with the router's search alone."""
    app: FastAPI = client.app  # type: ignore[attr-defined]
    index = app.router.middleware_stack
    answers = []
    try:
        for stack in (index, app.router.app):
            app.router.middleware_stack = stack
            answers.append(_answer(await client.request(method, path, **kwargs)))
    finally:
        app.router.middleware_stack = index
    return answers


@pytest.mark.parametrize("name", sorted(HOSTILE))
async def test_a_hostile_body_gets_the_same_answer_either_way(
    name: str, client: httpx.AsyncClient, database_url: str
) -> None:
    raw, said = HOSTILE[name]
    pushed = await client.post(
        "/sessions/s/leads", json={"leads": [{"payload": {}}, {"payload": {}}]}
    )
    assert pushed.status_code == 201, pushed.text
    leased = await client.post("/lease", json={"session": "s", "owner": "w"})
    assert leased.status_code == 200, leased.text
    before = state(database_url)
    app: FastAPI = client.app  # type: ignore[attr-defined]
    index = app.router.middleware_stack
    assert isinstance(index, route_index.RouteIndex)
    posted = sorted(path for method, path in index.entries() if method == "POST")
    assert set(dict(WORKER_ROUTES).values()) <= set(posted)
    for path in posted:
        with_index, with_search = await _both(
            client, "POST", path, content=raw, headers={"content-type": "application/json"}
        )
        assert with_index == with_search, path
        assert with_index[0] == 422, (path, with_index)
        assert said.encode() in with_index[2], (path, with_index)
    assert state(database_url) == before


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/lease", 405),  # a path the index knows, a method it does not
        ("POST", "/lease/", 307),  # the search's redirect of a trailing slash
        ("POST", "/no-such-route", 404),
        ("HEAD", "/healthz", 405),  # as FastAPI answers HEAD of a GET route
        ("GET", "/stats", 200),
        ("POST", "/lease", 422),  # no body
    ],
)
async def test_the_other_answers_are_the_same_either_way(
    method: str, path: str, status: int, client: httpx.AsyncClient
) -> None:
    with_index, with_search = await _both(
        client, method, path, headers={"content-type": "application/json"}
    )
    assert with_index == with_search
    assert with_index[0] == status, with_index


async def test_a_lease_through_the_index_is_labelled_by_its_route(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/sessions/labelled/leads", json={"leads": [{"payload": {}}]})
    leased = await client.post("/lease", json={"session": "labelled", "owner": "w"})
    assert leased.status_code == 200, leased.text
    [lease] = leased.json()["leases"]
    done = await client.post(
        "/complete",
        json={"lead_id": lease["lead"]["id"], "token": lease["token"], "status": "done"},
    )
    assert done.status_code == 200, done.text
    metrics = (await client.get("/metrics")).text
    assert 'method="POST",route="/lease",status="200"' in metrics
    assert 'method="POST",route="/complete",status="200"' in metrics
