"""A session's settings over their whole ranges (``leaseq.limits``), and rows outside them.

The token bucket's arithmetic (``statements.lease_limited``) is proved by hypothesis on the real
statements on PostgreSQL: settings at the edges of each range and between, the injected
database clock moved from nothing to years between leases, buckets empty, full and between.
No statement ever fails, the bucket never grants more than its rate and burst allow (nor
the cap more than ``max_leased``), and a bucket that had the time to fill grants its burst.

Rows outside the ranges, written in SQL (by an older version, or by hand: NaN, infinities,
denormals, infinite timestamps), read as the nearest setting in range, and leasing them,
the fleet's view, the stats and the dashboard's data never fail on them.
"""

from __future__ import annotations

import asyncio
import math
import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.config import Settings
from app.domain import overview
from app.domain.queue import Queue
from app.leasing.fleet import Fleet
from app.store.pool import Database
from leaseq.limits import (
    INT32_MAX,
    MAX_BURST,
    MAX_LEASE_BATCH,
    MAX_RATE_PER_S,
    MAX_WEIGHT,
    MIN_BURST,
    MIN_RATE_PER_S,
    MIN_WEIGHT,
)
from leaseq.model import SessionSettings
from tests.support import T0, across, leads, lease_from, leasing_of

EXAMPLES = 60
YEAR_S = 365 * 86400
# Rounding in double precision: the bound of a window may be crossed by this share of it.
ROUNDING = 1e-9


def log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats from ``low`` to ``high``, each order of magnitude as likely."""
    exponents = st.floats(math.log10(low), math.log10(high))
    return exponents.map(lambda e: min(high, max(low, 10.0**e)))


WEIGHTS = st.sampled_from([MIN_WEIGHT, MAX_WEIGHT]) | log_uniform(MIN_WEIGHT, MAX_WEIGHT)
RATES = (
    st.sampled_from([MIN_RATE_PER_S, MAX_RATE_PER_S, 49.0])
    | log_uniform(MIN_RATE_PER_S, MAX_RATE_PER_S)
    | st.floats(MIN_RATE_PER_S, MAX_RATE_PER_S)
)
BURSTS = (
    st.none()
    | st.sampled_from([MIN_BURST, MAX_BURST])
    | st.integers(MIN_BURST, 30)
    | st.integers(MIN_BURST, MAX_BURST)
)
CAPS = st.none() | st.sampled_from([0, INT32_MAX]) | st.integers(0, 30)
SETTINGS = st.builds(
    SessionSettings, weight=WEIGHTS, max_leased=CAPS, rate_per_s=st.none() | RATES, burst=BURSTS
).map(lambda s: s if s.rate_per_s is not None else replace(s, burst=None))
# From nothing to years, in the database clock's microseconds.
ELAPSED = (
    st.sampled_from([0, 1, 500_000, 10**6, 3600 * 10**6, 10 * YEAR_S * 10**6])
    | st.integers(0, 10 * 10**6)
    | st.integers(0, 10 * YEAR_S * 10**6)
).map(lambda us: timedelta(microseconds=us))
ASKED = st.sampled_from([1, MAX_LEASE_BATCH]) | st.integers(1, MAX_LEASE_BATCH)
STEPS = st.lists(st.tuples(ELAPSED, ASKED), min_size=1, max_size=6)
# The bucket before the first lease: never drawn (full), or its level, as a share of the
# burst, from empty to full.
LEVELS = st.none() | st.sampled_from([0.0, 1.0]) | st.floats(0, 1)


@pytest.fixture
def runner(database_url: str) -> Iterator[tuple[asyncio.Runner, Queue]]:
    """One event loop and one pool for every example of a property (hypothesis calls the
    example function once per example, synchronously)."""
    with asyncio.Runner() as loop:
        db = Database.from_settings(Settings(statement_timeout_ms=30_000), database_url)
        loop.run(db.open())
        try:
            yield loop, Queue(db)
        finally:
            loop.run(db.close())


def properly(test: Any) -> Any:
    return settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )(test)


def seconds(span: timedelta) -> Fraction:
    """A span of the database clock exactly (whole microseconds)."""
    return Fraction(span // timedelta(microseconds=1), 10**6)


# -- the ranges ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "edge",
    [
        SessionSettings(weight=MIN_WEIGHT),
        SessionSettings(weight=MAX_WEIGHT),
        SessionSettings(max_leased=0),
        SessionSettings(max_leased=INT32_MAX),
        SessionSettings(rate_per_s=MIN_RATE_PER_S, burst=MIN_BURST),
        SessionSettings(rate_per_s=MAX_RATE_PER_S, burst=MAX_BURST),
    ],
)
async def test_each_edge_of_each_range_is_stored_and_read_back_as_it_is(
    queue: Queue, edge: SessionSettings
) -> None:
    assert await queue.put_settings("s", edge) == edge
    assert await queue.settings("s") == edge
    assert await queue.settings_all() == {"s": edge}


# -- the bucket's arithmetic over the ranges ---------------------------------------------


def test_the_bucket_never_fails_and_never_grants_more_than_rate_and_burst_allow(
    runner: tuple[asyncio.Runner, Queue],
) -> None:
    loop, queue = runner

    @properly
    @given(limits=SETTINGS, level=LEVELS, steps=STEPS)
    def bucket(
        limits: SessionSettings, level: float | None, steps: list[tuple[timedelta, int]]
    ) -> None:
        loop.run(check_bucket(queue, limits, level, steps))

    bucket()


async def check_bucket(
    queue: Queue, limits: SessionSettings, level: float | None, steps: list[tuple[timedelta, int]]
) -> None:
    session = f"b-{uuid.uuid4().hex[:16]}"
    await queue.push(session, leads(sum(asked for _, asked in steps)))
    assert await queue.put_settings(session, limits, now=T0) == limits
    assert await queue.settings(session) == limits
    rate, cap = limits.rate_per_s, limits.max_leased
    burst = (limits.burst or max(1, math.ceil(rate))) if rate is not None else 0
    start: Fraction | None = None  # the bucket's level at T0; None: full when first drawn
    if rate is not None and level is not None:
        [row] = await queue.db.rows(
            "UPDATE session_settings SET tokens = %(tokens)s, refilled_at = %(at)s "
            "WHERE session = %(session)s RETURNING tokens",
            {"tokens": level * burst, "at": T0, "session": session},
        )
        start = Fraction(row["tokens"])

    times: list[datetime] = []
    granted: list[int] = []
    now = T0
    for elapsed, asked in steps:
        now += elapsed
        leased = await lease_from(queue, session, "w", max=asked, ttl_s=3600, now=now)
        room = math.inf if cap is None else cap - sum(granted)
        n = len(leased.leases)
        assert n <= min(asked, room)
        if rate is None:  # a cap alone (or nothing) grants all it has room for
            assert n == min(asked, room)
        else:
            assert leased.next_token_s is None or 0 < leased.next_token_s <= 1 / rate * (1 + 1e-9)
            quiet = now - times[-1] if times else None
            # A bucket never drawn, or quiet for twice the time it takes to fill, is full.
            if (start is None and not times) or (
                quiet is not None and seconds(quiet) >= 2 * burst / Fraction(rate)
            ):
                assert n == min(asked, room, burst), (n, asked, room, burst)
        times.append(now)
        granted.append(n)
    assert (await queue.stats(session)).leased == sum(granted)
    if rate is None:
        return
    r = Fraction(rate)
    for i in range(len(steps)):
        if i == 0 and start is not None:  # from its level at T0, refilled up to its burst
            first = min(Fraction(burst), start + r * seconds(times[0] - T0))
        else:
            first = Fraction(burst)
        for j in range(i, len(steps)):
            allowed = first + r * seconds(times[j] - times[i])
            window = sum(granted[i : j + 1])
            assert window <= math.floor(allowed * (1 + ROUNDING)), (i, j, window, allowed)


# -- rows outside the ranges, written in SQL ---------------------------------------------

NAN, INF = float("nan"), float("inf")
# Every double PostgreSQL's checks (weight > 0, rate_per_s > 0) let in, edges first.
POSITIVE = st.sampled_from(
    [5e-324, 1e-320, 1e-300, 1e-7, 2e6, 1e300, 1.7976931348623157e308, INF, NAN]
) | st.floats(min_value=5e-324, allow_infinity=True)
ANY_LEVEL = st.none() | st.sampled_from([NAN, INF, -INF, -1e308, 1e308, -1.0]) | st.floats()
TIMES = (
    st.none()
    | st.sampled_from(
        ["-infinity", "infinity", "4713-01-01 00:00:00+00 BC", "294276-12-31 23:59:59+00"]
    )
    | ELAPSED.map(lambda span: (T0 - span).isoformat())
)
RAW = st.fixed_dictionaries(
    {
        "weight": POSITIVE,
        "max_leased": st.none() | st.sampled_from([0, INT32_MAX]) | st.integers(0, INT32_MAX),
        "rate_per_s": st.none() | POSITIVE,
        "burst": st.none() | st.sampled_from([1, INT32_MAX]) | st.integers(1, INT32_MAX),
        "tokens": ANY_LEVEL,
        "refilled_at": TIMES,
    }
).map(lambda raw: raw if raw["rate_per_s"] is not None else {**raw, "burst": None})


def nearest(value: float | None, low: float, high: float) -> float | None:
    """The setting in range a stored value reads as (NaN, above every number: ``high``)."""
    if value is None:
        return None
    return high if math.isnan(value) else min(high, max(low, value))


def test_rows_outside_the_ranges_read_as_the_nearest_setting_and_never_fail_a_lease(
    runner: tuple[asyncio.Runner, Queue],
) -> None:
    loop, queue = runner

    @properly
    @given(raw=RAW, steps=STEPS)
    def stored(raw: dict[str, Any], steps: list[tuple[timedelta, int]]) -> None:
        loop.run(check_stored(queue, raw, steps))

    stored()


async def check_stored(
    queue: Queue, raw: dict[str, Any], steps: list[tuple[timedelta, int]]
) -> None:
    session = f"r-{uuid.uuid4().hex[:16]}"
    await queue.db.rows(
        "INSERT INTO session_settings"
        " (session, weight, max_leased, rate_per_s, burst, tokens, refilled_at)"
        " VALUES (%(session)s, %(weight)s, %(max_leased)s, %(rate_per_s)s, %(burst)s,"
        " %(tokens)s, %(refilled_at)s::timestamptz)",
        {**raw, "session": session},
    )
    read = await queue.settings(session)
    weight = nearest(raw["weight"], MIN_WEIGHT, MAX_WEIGHT)
    assert weight is not None
    assert read == SessionSettings(
        weight=weight,
        max_leased=raw["max_leased"],
        rate_per_s=nearest(raw["rate_per_s"], MIN_RATE_PER_S, MAX_RATE_PER_S),
        burst=None if raw["burst"] is None else min(MAX_BURST, raw["burst"]),
    )
    assert (await queue.settings_all())[session] == read
    await queue.push(session, leads(sum(asked for _, asked in steps)))
    rate = read.rate_per_s
    burst = (read.burst or max(1, math.ceil(rate))) if rate is not None else None
    now, held = T0, 0
    for elapsed, asked in steps:
        now += elapsed
        leased = await lease_from(queue, session, "w", max=asked, ttl_s=3600, now=now)
        n = len(leased.leases)
        assert n <= asked and (burst is None or n <= burst)
        if leased.next_token_s is not None:
            assert rate is not None and 0 < leased.next_token_s <= 1 / rate * (1 + 1e-9)
        held += n
    assert read.max_leased is None or held <= read.max_leased
    # Every statement across sessions reads the row too: the fleet's view, stats, dashboard.
    await Fleet(leasing_of(queue).sessions).lease(across(None, "w"), now=now)
    await queue.stats_all()
    await overview.snapshot(queue)
    await queue.db.rows("DELETE FROM session_settings WHERE session = %(s)s", {"s": session})
