"""The whole API suite once more, every app's database on a Citus cluster.

``LEASEQ_TEST_CITUS=1`` makes the ``database_url`` of every test a database of a
cluster of its own (a coordinator and two workers, started by that run), migrated by
``leaseq db upgrade``'s revisions, so distributed: the same tests, the same expected
answers, on the cluster; but for the tests below, which turn the slow poll off and wait for
the notification of a lead's end, which a cluster does not send (docs/scaling.md, "Long polls
on a cluster"; ``tests/citus/test_listening.py`` shows the wait ending at its poll there).
"""

from __future__ import annotations

import os

import pytest

from tests.citus.cluster import Cluster
from tests.conftest import CITUS_ENV
from tests.support.serving import api_suite

ENDED_NOTIFICATIONS = [
    f"tests/api/test_wait_for_outcome.py::{test}"
    for test in (
        "test_a_waiter_wakes_when_another_process_completes_the_lead",
        "test_each_way_a_lead_ends_wakes_its_waiter",
        "test_500_waiters_hold_no_database_connection",
        "test_a_completion_notifies_only_when_someone_waits",
    )
]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_api_suite_passes_on_a_cluster(citus_cluster: Cluster) -> None:
    """``citus_cluster``: only where Citus is installed (else the one-line skip)."""
    api_suite({**os.environ, CITUS_ENV: "1"}, ENDED_NOTIFICATIONS, timeout_s=2300)
