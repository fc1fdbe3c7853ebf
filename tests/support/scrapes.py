"""Reading what the service and its PostgreSQL say: a Prometheus scrape's samples, a setting.

Tests of several tiers read both: the metrics of one process (tests/api), of several
processes summed (tests/deploy), and the server's ``autovacuum`` (tests/deploy, and the
dashboard's warning in a browser).
"""

from __future__ import annotations

from typing import Any

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from app.store.pool import libpq_url

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape, by name and sorted labels."""
    found: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    """One sample's value; 0 when the scrape has none of that name and labels."""
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def autovacuum_on(url: str) -> bool:
    """What the server says, read on a connection of its own."""
    with psycopg.connect(libpq_url(url)) as conn:
        row = conn.execute("SHOW autovacuum").fetchone()
    assert row is not None and row[0] in ("on", "off")
    return bool(row[0] == "on")
