"""Readers of the deployment files: docker-compose.yml, the Dockerfile, deploy/entrypoint.sh.

No Docker engine runs here, so the tests read these files and run what they
say outside a container: ``ImageRun`` is one compose service of the leaseq
image (its argv through the image's entrypoint, and its environment), and
``local`` rewrites it to this machine (the compose hosts ``postgres``,
``pgbouncer`` and ``api`` become the test's database, PgBouncer and
``leaseq serve``; the image's ``/app`` becomes the repo root).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT_SCRIPT = ROOT / "deploy" / "entrypoint.sh"
IMAGE_ROOT = "/app"  # the image's WORKDIR, where the repo's files are copied


def load_compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return loaded


@dataclass
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY, ENV ...
    arguments: str  # as written, continuation lines joined


@dataclass
class Stage:
    name: str | None
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} in stage {self.name}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """The stage's ENV, in the KEY=VALUE form (``$PATH`` references left as written)."""
        values: dict[str, str] = {}
        for instruction in self.all("ENV"):
            for item in shlex.split(instruction.arguments):
                key, _, value = item.partition("=")
                values[key] = value
        return values


def dockerfile_stages() -> tuple[dict[str, str], list[Stage]]:
    """The Dockerfile's global ARG defaults and its stages, in order."""
    lines: list[str] = []
    pending = ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        lines.append(pending + line)
        pending = ""
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in lines:
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            parts = rest.split()
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m[1]], parts[0])
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(name, base))
        else:
            stages[-1].instructions.append(Instruction(keyword, rest))
    return args, stages


def exec_form(instruction: Instruction) -> list[str]:
    """A CMD, ENTRYPOINT or HEALTHCHECK CMD in exec (JSON) form, as its argv."""
    text = instruction.arguments
    if instruction.keyword == "HEALTHCHECK":
        text = text[text.index("CMD ") + len("CMD ") :]
    argv = json.loads(text)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), text
    return argv


def entrypoint_verbs() -> set[str]:
    """The first arguments deploy/entrypoint.sh hands to ``leaseq`` (its ``case`` line)."""
    match = re.search(
        r"^\s*([\w -]+(?:\|[\w -]+)+)\)\s*\n\s*exec leaseq", ENTRYPOINT_SCRIPT.read_text(), re.M
    )
    assert match is not None, "deploy/entrypoint.sh has no `verb | verb) exec leaseq` case"
    return {verb.strip() for verb in match[1].split("|")}


@dataclass
class ImageRun:
    """One compose service of the leaseq image, as its container would run."""

    service: str
    argv: list[str]  # the image's entrypoint (or the service's) and the command
    environment: dict[str, str]

    @property
    def command(self) -> list[str]:
        """What the entrypoint script receives."""
        return self.argv[1:]


def image_stage() -> Stage:
    """The stage ``docker build .`` builds: the last one."""
    return dockerfile_stages()[1][-1]


def builds_leaseq(service: Mapping[str, Any]) -> bool:
    build = service.get("build")
    if build is None:
        return False
    context = build if isinstance(build, str) else build.get("context", ".")
    target = None if isinstance(build, str) else build.get("target")
    return context == "." and target in (None, image_stage().name)


def environment_of(service: Mapping[str, Any]) -> dict[str, str]:
    declared = service.get("environment") or {}
    if isinstance(declared, list):
        declared = dict(item.partition("=")[::2] for item in declared)
    return {str(k): "" if v is None else str(v) for k, v in declared.items()}


def image_runs() -> list[ImageRun]:
    """Every compose service that runs the leaseq image, with the image's defaults applied."""
    stage = image_stage()
    entrypoint = exec_form(stage.last("ENTRYPOINT"))
    cmd = exec_form(stage.last("CMD"))
    image_env = {k: v for k, v in stage.env().items() if k.startswith("LEASEQ_")}
    runs = []
    for name, service in load_compose()["services"].items():
        if not builds_leaseq(service):
            continue
        command = service.get("command", cmd)
        command = shlex.split(command) if isinstance(command, str) else list(command)
        argv = list(service.get("entrypoint", entrypoint)) + command
        runs.append(ImageRun(name, argv, {**image_env, **environment_of(service)}))
    return runs


def run_of(service: str) -> ImageRun:
    [found] = [run for run in image_runs() if run.service == service]
    return found


def local(run: ImageRun, hosts: Mapping[str, Callable[[str], str]]) -> ImageRun:
    """``run`` on this machine: URLs to the compose hosts rewritten by ``hosts`` (host name ->
    function of the URL), ``/app`` paths pointed at the repo, the entrypoint the repo's."""

    def rewrite(value: str) -> str:
        if value.startswith(IMAGE_ROOT + "/"):
            return str(ROOT / value[len(IMAGE_ROOT) + 1 :])
        if "://" in value:
            host = make_url(value).host if value.startswith("postgres") else _http_host(value)
            if host in hosts:
                return hosts[host](value)
        return value

    argv = [rewrite(arg) for arg in run.argv]
    assert argv[0] == str(ENTRYPOINT_SCRIPT), argv
    environment = {key: rewrite(value) for key, value in run.environment.items()}
    return ImageRun(run.service, argv, environment)


def _http_host(url: str) -> str | None:
    match = re.match(r"https?://([^:/]+)", url)
    return match[1] if match else None
