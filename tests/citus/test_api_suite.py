"""The whole API suite once more, every app's database on a Citus cluster.

``LEASEQ_TEST_CITUS=1`` makes the ``database_url`` of every test a database of a
cluster of its own (a coordinator and two workers, started by that run), migrated by
``leaseq db upgrade``'s revisions, so distributed: the same tests, the same expected
answers, on the cluster; but for the one test listed below, which writes to ``leads`` by
hand and checks the NOTIFY of the one-PostgreSQL trigger ``leads_ended``, which a cluster does
not have: there the statements that end leads send it (docs/scaling.md, "Outcome waits on a
cluster"), and ``tests/citus/test_listening.py`` has the test's twin through them.
"""

from __future__ import annotations

import os

import pytest

from tests.citus.cluster import CITUS_MISSING, citus_installed
from tests.conftest import CITUS_ENV
from tests.support import system
from tests.support.serving import api_suite

THE_TRIGGER = [
    "tests/api/test_wait_for_outcome.py::test_a_completion_notifies_only_when_someone_waits",
]


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_api_suite_passes_on_a_cluster() -> None:
    """Only where Citus is installed (else the one-line skip); the suite's run starts its own
    cluster."""
    if not citus_installed():
        system.unavailable(CITUS_MISSING)
    api_suite({**os.environ, CITUS_ENV: "1"}, THE_TRIGGER, timeout_s=2300)
