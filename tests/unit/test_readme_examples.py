"""The READMEs' Python examples compile as they stand, so each one can be pasted and run.

A block is every fenced ``python`` block; top-level ``await`` or ``async with``
would be a SyntaxError in a file, so an example wraps them in a coroutine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
READMES = (ROOT / "clients" / "python" / "README.md", ROOT / "README.md")
FENCE = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def python_blocks(readme: Path) -> list[tuple[int, str]]:
    """Each fenced python block of ``readme`` with the line its code starts on."""
    text = readme.read_text()
    return [(text.count("\n", 0, found.start(1)) + 1, found[1]) for found in FENCE.finditer(text)]


@pytest.mark.parametrize("readme", READMES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_python_example_compiles(readme: Path) -> None:
    blocks = python_blocks(readme)
    assert blocks, f"no python example in {readme}"
    for line, code in blocks:
        try:
            compile(code, f"{readme.name}:{line}", "exec")
        except SyntaxError as exc:
            pytest.fail(f"{readme.relative_to(ROOT)}, the block at line {line}: {exc}")
