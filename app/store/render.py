"""Write every statement, each variant of it, whole into ``app/store/sql/<concern>.sql``.

``python -m app.store.render`` writes the files; ``--check`` only says which are out of
step with the code (tests/unit/test_rendered_sql.py runs it). A reviewer reads the
statements there as PostgreSQL gets them, one file per module of ``app.store.statements``.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from pathlib import Path

from app.store.statements import REGISTRY, Builder

SQL_DIR = Path(__file__).parent / "sql"
COMMAND = "python -m app.store.render"


def _variant_name(builder: Builder, values: tuple[object, ...]) -> str:
    shown = ", ".join(
        f"{name}={value}" for name, value in zip(builder.variants, values, strict=True)
    )
    return f"{builder.name} ({shown})" if shown else builder.name


def _section(builder: Builder) -> str:
    """One statement: its docstring as a comment, its parameters, then each variant's text."""
    doc = "".join(f"-- {line}".rstrip() + "\n" for line in builder.doc.splitlines())
    bound = ", ".join(builder.parameters) or "none"
    parts = [f"-- {'=' * 88}\n-- {builder.name}\n--\n{doc}--\n-- parameters: {bound}\n"]
    for values in itertools.product(*builder.variants.values()):
        text = builder.text(*values).strip("\n")
        parts.append(f"\n-- name: {_variant_name(builder, values)}\n{text};\n")
    return "".join(parts)


def rendered() -> dict[str, str]:
    """The text of every file, by file name: one per module of ``app.store.statements``."""
    by_module: dict[str, list[Builder]] = defaultdict(list)
    for builder in REGISTRY.values():
        by_module[builder.module.rsplit(".", 1)[-1]].append(builder)
    return {
        f"{module}.sql": (
            f"-- The statements of app.store.statements.{module}, as PostgreSQL gets them.\n"
            f"-- Written by `{COMMAND}`; do not edit.\n\n"
            + "\n".join(_section(builder) for builder in builders)
        )
        for module, builders in sorted(by_module.items())
    }


def out_of_step(directory: Path = SQL_DIR) -> list[str]:
    """The files of ``directory`` that differ from the code's statements (missing or extra
    ones too)."""
    wanted = rendered()
    present = {path.name for path in directory.glob("*.sql")}
    stale = [
        name
        for name, text in wanted.items()
        if not (directory / name).is_file() or (directory / name).read_text() != text
    ]
    return sorted(stale + sorted(present - wanted.keys()))


def write(directory: Path = SQL_DIR) -> None:
    directory.mkdir(exist_ok=True)
    wanted = rendered()
    for path in directory.glob("*.sql"):
        if path.name not in wanted:
            path.unlink()
    for name, text in wanted.items():
        (directory / name).write_text(text)


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check"]:
        if stale := out_of_step():
            print(f"out of step with the code: {', '.join(stale)}; run `{COMMAND}`")
            return 1
        return 0
    if argv[1:]:
        print(f"usage: {COMMAND} [--check]", file=sys.stderr)
        return 2
    write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
