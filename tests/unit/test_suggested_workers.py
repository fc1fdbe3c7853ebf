"""The workers the signal to scale on suggests (docs/beyond.md#a-signal-to-scale-on): the
arithmetic alone, with the numbers a user reads in the docs."""

from __future__ import annotations

import pytest

from app.domain.scaling import suggested_workers


@pytest.mark.parametrize(
    ("backlog", "leased", "rate", "target", "workers"),
    [
        (0, 0, 0.0, 60, 0),  # nothing queued or leased: scale to zero
        (0, 0, 5.0, 60, 0),
        (0, 3, 0.5, 60, 1),  # only leads in flight, finishing fast: one worker is enough
        (1000, 10, 10.0, 60, 17),  # 1 lead/s per worker: 1010 leads in 60 s
        (1000, 10, 10.0, 600, 2),  # a patient target asks for fewer
        (50, 0, 0.0, 60, 1),  # no worker and no rate yet: start one
        (50, 4, 0.0, 60, 8),  # leads longer than the window: twice the workers held
        (3, 4, 0.0, 60, 7),  # ...never more than there are leads
        (10, 1, 100.0, 60, 1),
        (5, 2, 1 / 600, 1, 7),  # a slow rate and a short target: one worker per lead
    ],
)
def test_suggested_workers(
    backlog: int, leased: int, rate: float, target: float, workers: int
) -> None:
    assert suggested_workers(backlog, leased, rate, target) == workers
