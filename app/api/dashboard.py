"""The operator's page: lead counts per session, from the domain's stats (no SQL here)."""

from __future__ import annotations

from html import escape

from app.model import AllCounts, Counts

COLUMNS = ("queued", "leased", "done", "failed", "cached", "pending")

_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 2rem; color: #222; }
table { border-collapse: collapse; }
th, td { padding: .3rem .8rem; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tfoot td { font-weight: bold; }
"""


def _row(name: str, counts: Counts) -> str:
    cells = "".join(f"<td>{getattr(counts, column)}</td>" for column in COLUMNS)
    return f"<tr><td>{escape(name)}</td>{cells}</tr>"


def render(stats: AllCounts) -> str:
    """The whole page."""
    head = "".join(f"<th>{column}</th>" for column in COLUMNS)
    rows = "\n".join(_row(name, counts) for name, counts in stats.sessions.items())
    if not rows:
        rows = f'<tr><td colspan="{len(COLUMNS) + 1}">no leads yet</td></tr>'
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>leaseq</title><style>{_STYLE}</style></head>
<body>
<h1>leaseq</h1>
<table>
<thead><tr><th>session</th>{head}</tr></thead>
<tbody>
{rows}
</tbody>
<tfoot>{_row("total", stats.total)}</tfoot>
</table>
</body>
</html>
"""
