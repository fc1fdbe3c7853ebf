"""Finding the handler ``leaseq worker --handler module:function`` names."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from leaseq.worker.job import Handler


def load_handler(spec: str) -> Handler:
    """The callable named by ``module:function``, imported with the current folder first.

    The current folder goes first on ``sys.path``, so a handler's own project
    (its ``app`` package, say) is what its imports find.
    """
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"expected module:function, got {spec!r}")
    here = os.getcwd()
    if here in sys.path:
        sys.path.remove(here)
    sys.path.insert(0, here)
    target: Any = importlib.import_module(module_name)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{spec} is not callable")
    handler: Handler = target
    return handler
