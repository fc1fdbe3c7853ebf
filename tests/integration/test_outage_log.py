"""An outage of the database logs a few lines, not one per failed connection attempt: one when
it starts, one every few seconds while it lasts (with counts), one when it ends
(``app.store.outage_log``), on a real PostgreSQL cut and restored by a proxy."""

from __future__ import annotations

import logging
import re

import pytest

from app.config import Settings
from app.store.outage_log import OutageLog
from app.store.pool import Database
from leaseq.errors import Unavailable
from tests.support.proxy import proxied

ATTEMPTS = 40


def lines(caplog: pytest.LogCaptureFixture, logger: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == logger]


async def test_an_outage_is_three_kinds_of_line_with_counts(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with (
        proxied(database_url) as (proxy, through),
        Database.from_settings(Settings(connect_timeout_s=2), through) as db,
    ):
        assert await db.rows("SELECT 1 AS one") == [{"one": 1}]
        await proxy.stop()
        for _ in range(ATTEMPTS):
            with pytest.raises(Unavailable):
                await db.rows("SELECT 1 AS one")
        assert db.outage.ongoing
        await proxy.start()
        assert await db.rows("SELECT 1 AS one") == [{"one": 1}]
        assert not db.outage.ongoing
    said = lines(caplog, "leaseq.pg")
    assert [line for line in lines(caplog, "psycopg.pool") if "error connecting" in line] == []
    assert "unreachable: " in said[0] and "still" not in said[0], said
    assert "reachable again after" in said[-1], said
    attempts = re.search(r"\((\d+) failed connection attempts\)", said[-1])
    assert attempts is not None and int(attempts[1]) >= ATTEMPTS, said
    # Between the first and the last, only the lines every EVERY_S seconds say it goes on.
    assert all("still unreachable after" in line for line in said[1:-1]), said


def test_the_lines_of_one_outage_on_its_clock() -> None:
    now = [0.0]
    outage = OutageLog("db", every_s=5, clock=lambda: now[0])
    said: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("leaseq.pg")
    logger.addHandler(handler)
    try:
        for tenth in range(121):  # 12 s of failed attempts, ten a second
            now[0] = tenth / 10
            outage.failed(OSError("refused"))
        now[0] = 12.5
        outage.connected()
        outage.connected()  # no outage: nothing more
    finally:
        logger.removeHandler(handler)
    assert said == [
        "db unreachable: refused",
        "db still unreachable after 5 s: 50 failed connection attempts since the last line "
        "(51 in all); last: refused",
        "db still unreachable after 10 s: 50 failed connection attempts since the last line "
        "(101 in all); last: refused",
        "db reachable again after 12.5 s of outage (121 failed connection attempts)",
    ]
