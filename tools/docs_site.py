"""The docs site's hooks (mkdocs.yml ``hooks``): the reference pages made from the code.

A reference that is copied by hand drifts from what it describes, so the site
generates each of them at build time from the thing itself, and keeps no copy:

* ``<!-- generated: settings -->``: every field of ``app.config.Settings`` (its
  ``LEASEQ_*`` variable, type, default, bounds and description);
* ``<!-- generated: openapi -->``: every route and schema of the OpenAPI document
  ``create_app`` serves at ``/openapi.json``;
* ``<!-- generated: cli -->``: every ``leaseq`` command, as ``leaseq --help`` loads them
  (the client's and the server's);
* ``<!-- generated: sql -->``: the SQL function ``leaseq_push`` as the latest migration
  that defines it creates it;
* ``<!-- generated: metrics -->``: every metric of ``GET /metrics``, from an exposition
  rendered by ``app.metrics.render``.

A page holds a marker where its generated part goes, so the page, its prose and its
anchors are in ``docs/`` for anyone reading the repository. The home page is the
README itself. Links that leave ``docs/`` (source files, the clients' READMEs) are
written for the repository; on the site they become the path they name, in code, so
``mkdocs build --strict`` finds no broken link. A page in ``docs/`` that ``nav`` does
not list is added to the part its folder names (``tutorials/``, ``guides/``,
``reference/`` and ``clients/``, else the explanation), so a new page is on the site the
day it lands.
"""

from __future__ import annotations

import ast
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.MULTILINE)
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^()\s]+)\)")
# The part of the site a page not in ``nav`` joins, by its first folder.
PARTS = {
    "tutorials": "Tutorials",
    "guides": "How-to guides",
    "reference": "Reference",
    "clients": "Reference",
}
EXPLANATION = "Explanation"


# -- the generated references ------------------------------------------------------


def cell(text: object) -> str:
    """``text`` fit for a Markdown table's cell: one line, its pipes escaped, and the home
    folder of whoever built the site (in a default that names it) as ``~``."""
    line = " ".join(str(text).split()).replace("|", "\\|")
    return line.replace(str(Path.home()), "~") if str(Path.home()) != "/" else line


def linked(text: str, page: str) -> str:
    """``text`` with each ``docs/PAGE.md#anchor`` it cites made a link, relative to ``page``
    (a path under docs/); code cites the documents so, the site links them."""

    def link(found: re.Match[str]) -> str:
        target = os.path.relpath(DOCS / found[1], (DOCS / page).parent) + (found[2] or "")
        return f"[{found[0]}]({target})"

    return re.sub(r"\bdocs/([\w./-]+?\.md)(#[\w-]+)?", link, text)


def settings_reference(page: str) -> str:
    """A table of every setting: variable, type, default, bounds, meaning."""
    from pydantic_core import PydanticUndefined

    from app.config import Settings

    rows = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = "see its meaning"
        elif field.default is None:
            default = "unset"
        elif field.default == "":
            default = "empty"
        elif field.default is PydanticUndefined:
            default = "required"
        else:
            default = f"`{json.dumps(field.default)}`"
        bounds = [
            f"{symbol} {getattr(rule, attr)}"
            for rule in field.metadata
            for attr, symbol in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤"))
            if getattr(rule, attr, None) is not None
        ]
        kind = _annotation(field.annotation)
        if bounds:
            kind += " (" + ", ".join(bounds) + ")"
        meaning = linked(cell(field.description or ""), page)
        rows.append(f"| `LEASEQ_{name.upper()}` | {cell(kind)} | {default} | {meaning} |")
    return "\n".join(rows)


def _annotation(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) or str(annotation)
    return str(text).replace("pathlib.", "").replace("NoneType", "None")


def openapi_document() -> dict[str, Any]:
    """The document the service serves at ``/openapi.json`` (no database is opened)."""
    from app.api.app import create_app
    from app.config import Settings

    document: dict[str, Any] = create_app(Settings(database_url="postgresql://unused")).openapi()
    return document


def _schema_name(schema: dict[str, Any] | None) -> str:
    """A schema as a reader names it: its component's name, or its type."""
    if not schema:
        return "any"
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_slug('schema ' + name)})"
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " or ".join(_schema_name(part) for part in schema[union])
    if schema.get("type") == "array":
        return f"array of {_schema_name(schema.get('items'))}"
    if schema.get("type") == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {_schema_name(extra if isinstance(extra, dict) else None)}"
    return str(schema.get("type", "any"))


def _slug(heading: str) -> str:
    text = re.sub(r"`|\*\*", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def api_reference(page: str) -> str:
    """Every route, by tag, then every schema, from the OpenAPI document."""
    document = openapi_document()
    out: list[str] = []
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            tag = (operation.get("tags") or ["other"])[0]
            by_tag.setdefault(tag, []).append((method.upper(), path, operation))
    described = {tag["name"]: tag.get("description", "") for tag in document.get("tags", [])}
    out.append(f"The document: OpenAPI {document['openapi']}, {document['info']['title']} ")
    out.append(f"{document['info'].get('version', '')}; {sum(map(len, by_tag.values()))} routes.\n")
    for tag, operations in by_tag.items():
        out.append(f"## {tag.capitalize()}\n")
        if described.get(tag):
            out.append(linked(described[tag], page) + "\n")
        for method, path, operation in operations:
            out.append(f"### {method} {path}\n")
            out.append(f"Operation id `{operation.get('operationId', '')}`.\n")
            if operation.get("description") or operation.get("summary"):
                text = operation.get("description") or operation.get("summary")
                out.append(linked(str(text), page) + "\n")
            parameters = operation.get("parameters", [])
            if parameters:
                out.append("| parameter | in | type | required | meaning |")
                out.append("| --- | --- | --- | --- | --- |")
                for parameter in parameters:
                    out.append(
                        f"| `{parameter['name']}` | {parameter['in']} "
                        f"| {cell(_schema_name(parameter.get('schema')))} "
                        f"| {'yes' if parameter.get('required') else 'no'} "
                        f"| {cell(parameter.get('description', ''))} |"
                    )
                out.append("")
            body = operation.get("requestBody", {}).get("content", {})
            for media, content in body.items():
                out.append(f"Body ({media}): {_schema_name(content.get('schema'))}.\n")
            answers = []
            for status, response in operation["responses"].items():
                contents = response.get("content", {})
                shapes = ", ".join(_schema_name(c.get("schema")) for c in contents.values())
                answers.append(
                    f"| {status} | {cell(response.get('description', ''))} | {cell(shapes)} |"
                )
            out.append("| answer | meaning | body |\n| --- | --- | --- |")
            out.extend(answers)
            out.append("")
    out.append("## Schemas\n")
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        out.append(f"### Schema {name}\n")
        if schema.get("description"):
            out.append(linked(cell(schema["description"]), page) + "\n")
        properties = schema.get("properties", {})
        required = set(schema.get("required", []))
        if properties:
            out.append("| field | type | required | meaning |\n| --- | --- | --- | --- |")
            for field, spec in properties.items():
                out.append(
                    f"| `{field}` | {cell(_schema_name(spec))} "
                    f"| {'yes' if field in required else 'no'} "
                    f"| {linked(cell(spec.get('description', '')), page)} |"
                )
            out.append("")
        elif "enum" in schema:
            out.append("One of " + ", ".join(f"`{value}`" for value in schema["enum"]) + ".\n")
    return "\n".join(out)


def cli_reference(page: str) -> str:
    """Every ``leaseq`` command, its usage, options and examples."""
    from leaseq.cli.root import command_tree

    group = command_tree()
    out: list[str] = []
    for path, command in _commands(group, ["leaseq"]):
        out.append(f"## {' '.join(path)}\n")
        if command.help:
            out.append(cell(command.help) + "\n")
        context = command.make_context(path[-1], [], resilient_parsing=True)
        usage = " ".join(command.collect_usage_pieces(context))
        out.append(f"```\n{' '.join(path)} {usage}\n```\n")
        rows = []
        for param in command.params:
            if getattr(param, "hidden", False) or param.name == "help":
                continue
            names = ", ".join(f"`{name}`" for name in [*param.opts, *param.secondary_opts])
            envvar = f"`{param.envvar}`" if param.envvar else ""
            default = param.default
            shown = "" if default in (None, False, (), []) or callable(default) else default
            help_text = getattr(param, "help", None) or ""
            if param.param_type_name == "argument":
                names = f"`{(param.metavar or param.name or '').upper()}` (argument)"
            if param.required:
                help_text = f"Required. {help_text}"
            rows.append(f"| {names} | {envvar} | {cell(shown)} | {linked(cell(help_text), page)} |")
        if rows:
            out.append("| option | variable | default | meaning |\n| --- | --- | --- | --- |")
            out.extend(rows)
            out.append("")
        if command.epilog:
            for paragraph in command.epilog.split("\n\n"):
                out.append(f"- {cell(paragraph)}")
            out.append("")
    return "\n".join(out)


def _commands(command: Any, path: list[str]) -> Iterator[tuple[list[str], Any]]:
    """Each command under ``command`` (itself first when it is not the root), depth first."""
    subcommands = getattr(command, "commands", None)
    if len(path) > 1:
        yield path, command
    if subcommands is not None:
        context = command.make_context(path[-1], [], resilient_parsing=True)
        for name in command.list_commands(context):
            yield from _commands(subcommands[name], [*path, name])


def sql_reference(page: str) -> str:
    """``leaseq_push`` as the latest migration that creates it does, with that revision's
    own account of it."""
    versions = sorted((ROOT / "migrations" / "versions").glob("[0-9]*.py"))
    defining = [p for p in versions if "FUNCTION leaseq_push(" in p.read_text()]
    latest = defining[-1]
    text = latest.read_text()
    created = r"CREATE OR REPLACE FUNCTION leaseq_push\((.*?)\)\s*RETURNS (\w+)"
    found = re.search(created, text, re.S)
    assert found, f"{latest.name} creates leaseq_push in a form this page does not read"
    arguments = [" ".join(line.split()) for line in found[1].split(",")]
    signature = "leaseq_push(\n    " + ",\n    ".join(arguments) + f"\n) RETURNS {found[2]}"
    doc = ast.get_docstring(ast.parse(text)) or ""
    first = ast.get_docstring(ast.parse(defining[0].read_text())) or ""
    return "\n".join(
        [
            f"As revision `{latest.stem}` (`migrations/versions/{latest.name}`) creates it:\n",
            f"```sql\n{signature}\n```\n",
            f"What revision `{defining[0].stem}`, which added it, says:\n",
            linked(_quoted(first), page),
            "",
            *(
                [f"And revision `{latest.stem}`:\n", linked(_quoted(doc), page), ""]
                if latest != defining[0]
                else []
            ),
        ]
    )


def _quoted(text: str) -> str:
    """A revision's docstring as a quotation, without Alembic's header lines."""
    text = text.split("\nRevision ID:", 1)[0].rstrip()
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines())


def metrics_reference(page: str) -> str:
    """Every metric family of an exposition ``app.metrics.render`` makes, with its type,
    labels and help, in the order a scrape gives them."""
    from app.metrics import render
    from leaseq.model import AllCounts, Counts

    exposition = render(AllCounts(sessions={"s": Counts()}, total=Counts())).decode()
    families: dict[str, dict[str, Any]] = {}
    for line in exposition.splitlines():
        if line.startswith("# HELP "):
            name, _, text = line[7:].partition(" ")
            families.setdefault(name, {"labels": set()})["help"] = text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            families.setdefault(name, {"labels": set()})["type"] = kind
        elif line and not line.startswith("#"):
            sample = line.split(" ", 1)[0]
            name, _, labels = sample.partition("{")
            family = next((f for f in families if name == f or name.startswith(f + "_")), None)
            if family is not None:
                for label in re.findall(r"(\w+)=", labels):
                    if label not in ("le", "quantile"):
                        families[family]["labels"].add(label)
    # A labelled metric with no sample yet shows no label: its definition names them.
    from prometheus_client.metrics import MetricWrapperBase

    import app.metrics

    for metric in vars(app.metrics).values():
        if isinstance(metric, MetricWrapperBase):
            for name in (metric._name, f"{metric._name}_total"):
                if name in families:
                    families[name]["labels"].update(metric._labelnames)
    rows = ["| metric | type | labels | meaning |", "| --- | --- | --- | --- |"]
    for name, family in families.items():
        if name.endswith("_created"):
            continue  # each counter's and histogram's start time, as the client library adds
        labels = ", ".join(f"`{label}`" for label in sorted(family["labels"]))
        help_text = family.get("help", "").replace("\\\\", "\\")
        rows.append(
            f"| `{name}` | {family.get('type', '')} | {labels} | {linked(cell(help_text), page)} |"
        )
    return "\n".join(rows)


GENERATORS: dict[str, Callable[[str], str]] = {
    "settings": settings_reference,
    "openapi": api_reference,
    "cli": cli_reference,
    "sql": sql_reference,
    "metrics": metrics_reference,
}


def fill(markdown: str, page: str) -> str:
    """``markdown`` with each marker replaced by what its generator makes."""
    return MARKER.sub(lambda found: GENERATORS[found[1]](page), markdown)


# -- links written for the repository, read on the site -------------------------------


def site_links(markdown: str, source: Path, page: str) -> str:
    """The links of ``markdown`` (the file ``source``, shown as ``page`` under docs/) as the
    site needs them: into docs/ relative to ``page``, the README as the home page, and
    anything else outside docs/ as the path it names, in code."""
    out = []
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
        out.append(line if fenced else LINK.sub(lambda m: _site_link(m, source, page), line))
    return "".join(out)


def _site_link(found: re.Match[str], source: Path, page: str) -> str:
    bang, text, target = found[1], found[2], found[3]
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith(("#", "/")):
        return found[0]
    path, _, anchor = target.partition("#")
    where = (source.parent / path).resolve()
    here = (DOCS / page).parent
    if where == README:
        where = DOCS / "index.md"
    if where == DOCS:
        where = DOCS / "index.md"
    if where == DOCS / "index.md" or where.is_relative_to(DOCS):
        new = os.path.relpath(where, here).replace(os.sep, "/")
        return f"{bang}[{text}]({new}{'#' + anchor if anchor else ''})"
    shown = where.relative_to(ROOT).as_posix() if where.is_relative_to(ROOT) else path
    plain = text.strip("`")
    return f"`{shown}`" if plain in (shown, path, target) else f"{text} (`{shown}`)"


# -- the navigation: every page on the site --------------------------------------------


def listed(nav: Iterable[Any]) -> Iterator[str]:
    """Every page path ``nav`` names."""
    for item in nav:
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for value in item.values():
                yield from listed([value] if isinstance(value, str) else value)


def with_every_page(nav: list[Any], pages: Iterable[str]) -> list[Any]:
    """``nav`` with each page it does not name added to its part, by the page's folder."""
    named = set(listed(nav))
    for page in sorted(pages):
        if page in named:
            continue
        part = PARTS.get(page.split("/", 1)[0] if "/" in page else "", EXPLANATION)
        for item in nav:
            if isinstance(item, dict) and part in item:
                item[part].append(page)
                break
        else:
            nav.append({part: [page]})
    return nav


# -- mkdocs' events ------------------------------------------------------------------


def on_files(files: Any, config: Any) -> Any:
    """The home page from the README; every page of docs/ in the navigation."""
    from mkdocs.structure.files import File

    if files.get_file_from_path("index.md") is None:
        files.append(File.generated(config, "index.md", content=README.read_text()))
    pages = [f.src_uri for f in files.documentation_pages()]
    if config["nav"] is not None:
        config["nav"] = with_every_page(config["nav"], pages)
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Generated parts filled in; links made the site's."""
    uri = page.file.src_uri
    source = README if uri == "index.md" and not (DOCS / "index.md").exists() else DOCS / uri
    return site_links(fill(markdown, uri), source, uri)
