"""The Dockerfile, read: a slim Python base, a non-root user, the healthcheck on /readyz, and
every file it copies present in the build context. tests/deploy/test_entrypoint.py runs the
entrypoint and the healthcheck it names."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from fnmatch import fnmatch
from pathlib import Path

from tests.deploy.compose import (
    DOCKERFILE,
    ENTRYPOINT_SCRIPT,
    IMAGE_ROOT,
    ROOT,
    Stage,
    dockerfile_stages,
    exec_form,
    image_stage,
)

IGNORE_FILE = ROOT / ".dockerignore"


def ignored(path: str) -> bool:
    """Whether .dockerignore keeps ``path`` (relative to the repo) out of the build context."""
    patterns = [
        line.strip()
        for line in IGNORE_FILE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    parts = Path(path).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(
        fnmatch(prefix, pattern.removeprefix("**/")) or fnmatch(prefix, pattern)
        for pattern in patterns
        for prefix in [*prefixes, *parts]
    )


def copies(stage: Stage) -> list[tuple[list[str], str]]:
    """The stage's COPY instructions from the build context: (sources, destination)."""
    found = []
    for instruction in stage.all("COPY"):
        words = shlex.split(instruction.arguments)
        if any(word.startswith("--from") for word in words):
            continue
        words = [w for w in words if not w.startswith("--")]
        found.append((words[:-1], words[-1]))
    return found


def image_path(stage: Stage, inside: str) -> Path:
    """The repo file or folder that ``inside`` (a path in the image) was copied from."""
    workdir = stage.last("WORKDIR").arguments if stage.all("WORKDIR") else "/"
    mapping: dict[str, str] = {}  # a path in the image -> the repo path copied there
    for sources, destination in copies(stage):
        target = posixpath.normpath(posixpath.join(workdir, destination))
        for source in sources:
            if source.endswith("/"):  # a folder's contents
                mapping[target] = source.rstrip("/")
            elif destination.endswith("/") or len(sources) > 1:
                mapping[posixpath.join(target, posixpath.basename(source))] = source
            else:
                mapping[target] = source
    for copied, source in mapping.items():
        if inside == copied or inside.startswith(copied + "/"):
            return ROOT / source / inside[len(copied) :].lstrip("/")
    raise AssertionError(f"{inside} is not copied into the image")


def test_the_image_is_built_on_a_slim_python() -> None:
    args, stages = dockerfile_stages()
    assert re.fullmatch(r"python:3\.1[1-9]-slim(-\w+)?", image_stage().base), image_stage().base
    assert stages[0].base == image_stage().base  # built and run on the same Python
    assert all(stage.name for stage in stages), "every stage named"
    assert "PYTHON_IMAGE" in args


def test_the_service_runs_as_a_user_that_is_not_root() -> None:
    stage = image_stage()
    user = stage.last("USER").arguments
    assert user not in ("root", "0") and not user.startswith("0:")
    [created] = [i for i in stage.all("RUN") if "useradd" in i.arguments]
    assert created.arguments.split()[-1] == user
    assert "--uid 0 " not in created.arguments
    # Nothing after USER runs as root again.
    after = stage.instructions[stage.instructions.index(stage.last("USER")) :]
    assert [i.keyword for i in after if i.keyword == "USER"] == ["USER"]


def test_the_healthcheck_asks_readyz_on_the_service_port() -> None:
    stage = image_stage()
    healthcheck = stage.last("HEALTHCHECK")
    assert re.search(r"--interval=\d+s", healthcheck.arguments)
    argv = exec_form(healthcheck)
    assert argv[0] == "python"
    script = image_path(stage, argv[1])
    assert script == ROOT / "deploy" / "healthcheck.py"
    assert "/readyz" in script.read_text()
    assert stage.env()["LEASEQ_PORT"] == "8000"
    assert "EXPOSE" in {i.keyword for i in stage.instructions}
    assert stage.last("EXPOSE").arguments == stage.env()["LEASEQ_PORT"]


def test_the_entrypoint_is_the_repos_script_and_the_default_is_serve() -> None:
    stage = image_stage()
    [entrypoint] = exec_form(stage.last("ENTRYPOINT"))
    assert entrypoint.startswith(IMAGE_ROOT + "/")
    assert image_path(stage, entrypoint) == ENTRYPOINT_SCRIPT
    assert os.access(ENTRYPOINT_SCRIPT, os.X_OK)
    assert exec_form(stage.last("CMD")) == ["serve"]
    assert stage.env()["LEASEQ_HOST"] == "0.0.0.0"  # reachable from outside the container
    # alembic upgrade head runs from the WORKDIR, as from the repo root.
    assert image_path(stage, f"{IMAGE_ROOT}/alembic.ini") == ROOT / "alembic.ini"
    assert image_path(stage, f"{IMAGE_ROOT}/migrations") == ROOT / "migrations"


def test_every_file_copied_is_in_the_build_context() -> None:
    for stage in dockerfile_stages()[1]:
        for sources, _ in copies(stage):
            for source in sources:
                assert (ROOT / source).exists(), f"{DOCKERFILE.name} copies missing {source}"
                assert not ignored(source.rstrip("/")), f".dockerignore drops {source}"
    # What pip needs to build both distributions (each pyproject names its readme).
    assert not ignored("README.md") and not ignored("app/cli/serve.py")
    assert not ignored("clients/python/pyproject.toml") and not ignored("clients/python/README.md")
    assert not ignored("clients/python/leaseq/cli/root.py")
    assert ignored(".venv") and ignored("tests/conftest.py") and ignored("app/__pycache__")


def test_the_build_installs_the_client_and_the_server() -> None:
    [build] = [s for s in dockerfile_stages()[1] if s.name == "build"]
    copied = {source for sources, _ in copies(build) for source in sources}
    assert {"clients/python", "pyproject.toml", "app", "migrations"} <= copied
    [install] = [i for i in build.all("RUN") if "pip install" in i.arguments]
    assert install.arguments.split()[-2:] == ["./clients/python", "."]


def test_the_pgbouncer_stage_runs_the_repos_pooling_rules() -> None:
    [stage] = [s for s in dockerfile_stages()[1] if s.name == "pgbouncer"]
    assert stage.base.startswith("debian:")
    assert stage.last("USER").arguments != "root"
    argv = exec_form(stage.last("ENTRYPOINT"))
    assert argv[0] == "pgbouncer"
    [(sources, _)] = copies(stage)
    assert sources == ["deploy/pgbouncer/"]

    def in_repo(path: str) -> Path:
        return image_path(stage, path)

    ini = in_repo(argv[1])
    assert ini == ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini"
    text = ini.read_text()
    [include] = re.findall(r"^%include (\S+)$", text, re.M)
    assert in_repo(include) == ROOT / "deploy" / "pgbouncer" / "pooling.ini"
    [auth_file] = re.findall(r"^auth_file = (\S+)$", text, re.M)
    assert in_repo(auth_file).is_file()
    assert "pool_mode = transaction" in in_repo(include).read_text()
    exposed = stage.last("EXPOSE").arguments
    assert f"listen_port = {exposed}" in text
