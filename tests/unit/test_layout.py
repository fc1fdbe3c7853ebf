"""The two distributions: one version, the client's short dependency list, the plugged commands.

What a fresh virtualenv with the client alone can do is tests/deploy/test_client_alone.py.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import leaseq
from leaseq import AsyncClient, Client, _wire
from leaseq.cli import root

ROOT = Path(__file__).resolve().parents[2]


def pyproject(path: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(path.read_text())["project"]
    return project


def test_one_version_for_both_and_the_server_pins_the_client() -> None:
    client = pyproject(ROOT / "clients" / "python" / "pyproject.toml")
    server = pyproject(ROOT / "pyproject.toml")
    assert (client["name"], server["name"]) == ("leaseq", "leaseq-server")
    assert client["version"] == server["version"] == leaseq.__version__
    assert f"leaseq=={client['version']}" in server["dependencies"]


def test_the_client_depends_on_httpx_aiohttp_sniffio_and_typer_only() -> None:
    client = pyproject(ROOT / "clients" / "python" / "pyproject.toml")
    names = {dependency.split(">")[0].split("=")[0] for dependency in client["dependencies"]}
    assert names == {"aiohttp", "httpx", "sniffio", "typer"}
    assert client["optional-dependencies"] == {
        "metrics": ["prometheus-client>=0.20"],
        "otel": ["opentelemetry-api>=1.20"],  # imported lazily, by leaseq.worker.tracing
    }
    assert client["scripts"] == {"leaseq": "leaseq.cli:main"}


def test_the_server_registers_its_commands_for_leaseq() -> None:
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    registered = server["entry-points"][root.ENTRY_POINTS]
    assert set(registered) == set(root.SERVER_COMMANDS)
    installed = {ep.name: ep for ep in metadata.entry_points(group=root.ENTRY_POINTS)}
    assert set(installed) == set(root.SERVER_COMMANDS)  # this environment has both
    for entry_point in installed.values():
        assert isinstance(entry_point.load(), typer.Typer)
    assert set(root.command_tree().commands) == set(root.ORDER)


def test_without_the_server_its_commands_say_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(root, "entry_points", lambda group: [])
    runner = CliRunner()
    for argv in (["serve"], ["serve", "--port", "9000"], ["db", "upgrade"], ["prune"]):
        result = runner.invoke(root.app, argv)
        assert result.exit_code == 1, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "needs the leaseq server" in lines[0], result.output
        assert "pip install leaseq-server" in lines[0]
    listed = runner.invoke(root.app, ["--help"])
    assert "Needs the server" in listed.output and "worker" in listed.output
    # The report comes from the service alone there, as a worker's machine asks for it.
    report = runner.invoke(root.app, ["report", "--help"])
    assert report.exit_code == 0 and "--url" in report.output, report.output
    assert "--database-url" not in report.output


@pytest.mark.parametrize("verb", ["worker", "push", "stats", "sweep"])
def test_the_clients_own_commands_never_import_the_server(verb: str) -> None:
    """Even where the server is installed: a handler's own ``app`` package stays its own."""
    probe = (
        "import sys\n"
        "from leaseq.cli import main\n"
        f"sys.argv = ['leaseq', {verb!r}, '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m == 'app' or m.startswith('app.')))\n"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert found.stdout.strip().splitlines()[-1] == "[]", found.stdout


def test_the_package_exports_its_public_api_and_none_of_its_machinery() -> None:
    exported = set(leaseq.__all__)
    assert {"AsyncClient", "Client", "Worker", "Job", "Lead", "SessionSettings"} <= exported
    assert {"LeaseqError", "LeaseLost", "InvalidInput", "Unavailable"} <= exported
    for name in exported:
        getattr(leaseq, name)  # each one importable from the package
        assert not name.startswith("_") or name == "__version__"
    machinery = {
        name
        for name, value in vars(_wire).items()
        if getattr(value, "__module__", None) == _wire.__name__ and name != "RetryPolicy"
    }
    assert {"parse_lead", "error_from_problem", "steps", "Call"} <= machinery
    assert not machinery & exported


def test_the_two_clients_have_the_same_methods_and_signatures() -> None:
    def methods(client: object) -> dict[str, inspect.Signature]:
        found = {name: getattr(client, name) for name in dir(client) if not name.startswith("_")}
        return {name: inspect.signature(m) for name, m in found.items() if callable(m)}

    blocking, awaited = Client("http://leaseq.test"), AsyncClient("http://leaseq.test")
    sync, async_ = methods(blocking), methods(awaited)
    assert sync.pop("close") == async_.pop("aclose")
    assert sync == async_
    assert {"push", "lease", "renew", "complete_and_lease", "release", "stats"} <= set(sync)
    for name in async_:
        assert inspect.iscoroutinefunction(getattr(awaited, name)), name
        assert not inspect.iscoroutinefunction(getattr(blocking, name)), name
    assert blocking.push.__doc__ == awaited.push.__doc__ == Client.push.__doc__
    blocking.close()


def test_a_checkout_migrates_with_its_own_revisions() -> None:
    """Not with those of the checkout the package was installed from (editable)."""
    from app.store.migrate import script_location

    assert Path(script_location()) == ROOT / "migrations"
