"""``leaseq docs``: where the documentation is, and how to read the docs site locally.

The site is built from ``docs/`` in a clone of leaseq (``mkdocs.yml``), not shipped in the
wheel, so the command says how to build it and, run from a clone, where that clone is.
"""

from __future__ import annotations

from pathlib import Path

from leaseq.cli.output import say
from leaseq.cli.root import app

DOCS_PORT = 8001  # beside the service's default 8000
SERVE = f"pip install -e '.[docs]' && mkdocs serve -a 127.0.0.1:{DOCS_PORT}"


def clone() -> Path | None:
    """The clone of leaseq this client runs from (an editable install), if it is one."""
    for folder in Path(__file__).resolve().parents:
        if (folder / "mkdocs.yml").is_file() and (folder / "docs").is_dir():
            return folder
    return None


@app.command(epilog=f"In a clone of leaseq:  {SERVE}")
def docs() -> None:
    """Say how to read the docs site locally (tutorials, guides, reference, design)."""
    found = clone()
    where = f"cd {found} && " if found is not None else "in a clone of leaseq: "
    say(f"The docs site, built from docs/ with MkDocs: {where}{SERVE}")
    say(f"then open http://127.0.0.1:{DOCS_PORT}/ (mkdocs build --strict writes it to site/).")
    say("A running service serves its API reference at /docs and /openapi.json.")
