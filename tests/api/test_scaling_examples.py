"""The autoscaler examples of docs/beyond.md#a-signal-to-scale-on, read as KEDA and a
HorizontalPodAutoscaler would read them: a ScaledObject's ``url`` answers and its
``valueLocation`` names a worker count in that answer (for one session and for the fleet); a
HorizontalPodAutoscaler's external metric and selector name a series of ``/metrics``. So an
example cannot drift from the service's answers."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml

from tests.support.scrapes import samples
from tests.support.serving import ROOT

SECTION = re.compile(r"^## A signal to scale on$(.*?)^## ", re.M | re.S)
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```$", re.M | re.S)


def examples(kind: str) -> list[dict[str, Any]]:
    """The section's YAML examples of ``kind``."""
    text = (ROOT / "docs" / "beyond.md").read_text(encoding="utf-8")
    section = SECTION.search(text)
    assert section is not None
    found = [yaml.safe_load(block) for block in YAML_BLOCK.findall(section.group(1))]
    return [doc for doc in found if doc["kind"] == kind]


def located(answer: dict[str, Any], location: str) -> Any:
    """KEDA's ``valueLocation`` (a dotted path into the JSON answer)."""
    found: Any = answer
    for step in location.split("."):
        found = found[step]
    return found


async def test_each_scaled_object_reads_a_worker_count(client: httpx.AsyncClient) -> None:
    await client.post("/sessions/tenant-a/leads", json={"leads": [{"payload": {}}] * 3})
    await client.post("/sessions/tenant-b/leads", json={"leads": [{"payload": {}}] * 2})
    scaled = examples("ScaledObject")
    paths = set()
    for example in scaled:
        [trigger] = example["spec"]["triggers"]
        assert trigger["type"] == "metrics-api"
        meta = trigger["metadata"]
        assert (meta["targetValue"], meta["authMode"]) == ("1", "bearer")
        url = urlsplit(meta["url"])
        paths.add(url.path)
        answer = await client.get(f"{url.path}?{url.query}")
        assert answer.status_code == 200, (meta["url"], answer.text)
        workers = located(answer.json(), meta["valueLocation"])
        # No rate yet: one worker more than the leads held (none) for each.
        assert workers == 1, (meta["url"], meta["valueLocation"], answer.json())
    assert paths == {"/sessions/tenant-a/scaling", "/scaling"}  # a session's and the fleet's


async def test_each_autoscalers_metric_is_a_series_of_the_scrape(client: httpx.AsyncClient) -> None:
    await client.post("/sessions/tenant-a/leads", json={"leads": [{"payload": {}}] * 2})
    scrape = samples((await client.get("/metrics")).text)
    hpas = examples("HorizontalPodAutoscaler")
    assert hpas
    for example in hpas:
        [metric] = example["spec"]["metrics"]
        assert metric["type"] == "External"
        name = metric["external"]["metric"]["name"]
        labels = tuple(sorted(metric["external"]["metric"]["selector"]["matchLabels"].items()))
        assert scrape.get((name, labels)) == 1, (name, labels)
        # The fleet's series, which the text tells to select for a pool of every session.
        assert (name, (("session", "*"),)) in scrape
