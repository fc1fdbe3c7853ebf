"""Every door that stores a lead applies the same checks (revision 0020): a payload the API
could not give back is refused by the REST push (a dependency's too), by ``leaseq_push()``
in SQL, by a schedule's definition, by the CLI's push and by the table itself, and nothing
of it is stored; what each door accepts, reads and leases as it was pushed. (A retry and a
schedule's tick store no payload of their own: they keep the one stored, which the table's
check held.)"""

from __future__ import annotations

import httpx
import psycopg
import pytest

from leaseq.limits import MAX_INTEGER_DIGITS
from tests.support.in_process import serve_database
from tests.support.serving import Services, leaseq

# The payloads' JSON text: numbers Python's json cannot read back as finite values.
HOSTILE = {
    "a long integer": '{"n": ' + "9" * 5000 + "}",
    "a long negative integer in a list": '{"n": [1, -' + "9" * (MAX_INTEGER_DIGITS + 1) + "]}",
    "a fraction beyond a double": '{"deep": {"n": ' + "9" * 400 + ".5}}",
}
# At the edges, on the side every door accepts.
FINE = {
    "the longest integer": '{"n": ' + "9" * MAX_INTEGER_DIGITS + "}",
    "the largest double": '{"n": 1.7976931348623157e308}',
    "a large integer": '{"n": ' + "9" * 400 + "}",
}


async def stored(client: httpx.AsyncClient) -> int:
    stats = (await client.get("/sessions/s/stats")).json()
    return int(stats["queued"] + stats["leased"] + stats["done"] + stats["failed"])


@pytest.mark.parametrize("payload", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_every_door_refuses_a_payload_it_could_not_give_back(
    client: httpx.AsyncClient, database_url: str, payload: str
) -> None:
    body = '{"leads": [{"payload": ' + payload + "}]}"
    pushed = await client.post(
        "/sessions/s/leads", content=body, headers={"content-type": "application/json"}
    )
    assert pushed.status_code == 422, pushed.text
    # A dependency's push: after a lead of the same call, refused whole.
    body = (
        '{"leads": [{"payload": {}, "key": "parent"}, {"after": [{"key": "parent"}], "payload": '
        + payload
        + "}]}"
    )
    dependent = await client.post(
        "/sessions/s/leads", content=body, headers={"content-type": "application/json"}
    )
    assert dependent.status_code == 422, dependent.text
    schedule = '{"session": "s", "cron": "* * * * *", "lead": {"payload": ' + payload + "}}"
    put = await client.put(
        "/schedules/hostile", content=schedule, headers={"content-type": "application/json"}
    )
    assert put.status_code == 422, put.text
    with psycopg.connect(database_url, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="payload: holds"):
            conn.execute("SELECT leaseq_push('s', %s::jsonb)", (payload,))
        with pytest.raises(psycopg.errors.CheckViolation, match="leads_payload_readable"):
            conn.execute("INSERT INTO leads (session, payload) VALUES ('s', %s::jsonb)", (payload,))
    assert await stored(client) == 0


@pytest.mark.parametrize("payload", list(FINE.values()), ids=list(FINE))
async def test_what_the_doors_accept_is_read_and_leased(
    client: httpx.AsyncClient, database_url: str, payload: str
) -> None:
    body = '{"leads": [{"payload": ' + payload + "}]}"
    pushed = await client.post(
        "/sessions/s/leads", content=body, headers={"content-type": "application/json"}
    )
    assert pushed.status_code == 201, pushed.text
    with psycopg.connect(database_url, autocommit=True) as conn:
        [[by_sql]] = conn.execute("SELECT leaseq_push('s', %s::jsonb)", (payload,)).fetchall()
    for lead_id in (*pushed.json()["ids"], by_sql):
        read = await client.get(f"/leads/{lead_id}")
        assert read.status_code == 200, read.text
    leased = await client.post("/lease", json={"session": "s", "owner": "w", "max": 10})
    assert leased.status_code == 200, leased.text
    assert len(leased.json()["leases"]) == 2


@pytest.mark.service
def test_the_cli_push_refuses_them_too(services: Services, database_url: str) -> None:
    """``leaseq push`` (a payload a line, or a lead a line) refuses each hostile payload,
    exit status 1, and stores nothing."""
    url, env = serve_database(database_url)
    service = services.start(database_url=url, env=env)
    for payload in HOSTILE.values():
        for args, line in (
            (("--payloads",), payload),
            ((), '{"payload": ' + payload + "}"),
        ):
            pushed = leaseq("push", "-s", "s", *args, "--url", service.url, input=line + "\n")
            assert pushed.returncode == 1, pushed.stdout + pushed.stderr
            # Refused as a bad line, said in one line: not a crash.
            assert pushed.stderr.startswith("error: line 1: "), pushed.stderr
            assert "nothing was pushed" in pushed.stderr and "Traceback" not in pushed.stderr
    with service.client() as http:
        stats = http.get("/sessions/s/stats").json()
    assert stats["queued"] + stats["leased"] + stats["done"] + stats["failed"] == 0, stats
