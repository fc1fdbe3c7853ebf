"""The TypeScript client's own tests, run from here: its unit tests (no service), its
integration tests and its README's example against a real ``leaseq serve``, its types in
step with the service's document, and its package, packed and installed offline.

Each needs Node 18+ and npm; without them each skips with one line saying how to get them
(fails instead under ``LEASEQ_TEST_REQUIRE_SYSTEM_PACKAGES=1``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from tests.clients.harness import TYPESCRIPT, built, run
from tests.support import system
from tests.support.npm_tools import NODE, NPM
from tests.support.serving import ROOT, Service, Services

# Minutes, not seconds: CI runs them (--run-slow), and so does `-m slow`.
pytestmark = [pytest.mark.service, pytest.mark.slow]

TOKEN = "typescript-tests"


@pytest.fixture
def typescript(tmp_path_factory: pytest.TempPathFactory) -> None:
    """clients/typescript installed (``npm ci``) and built, once per run."""
    built("typescript", tmp_path_factory.getbasetemp())


@pytest.fixture
def with_tokens(database_url: str, services: Services) -> Service:
    """A fresh ``leaseq serve`` with a full-access token (the token routes need one)."""
    return services.start(database_url=database_url, env={"LEASEQ_API_TOKENS": TOKEN})


def passed(done: subprocess.CompletedProcess[str]) -> int:
    """The tests node's runner passed; fails with its output unless every one did."""
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert re.search(r"^# fail 0$", done.stdout, re.M), output[-6000:]
    return int(re.findall(r"^# pass (\d+)$", done.stdout, re.M)[-1])


def test_unit_tests(typescript: None) -> None:
    """``npm test``: the backoff, the fences' vectors, the keys a retry repeats, the errors."""
    assert passed(run([system.need(NPM), "test"], TYPESCRIPT)) >= 20


def test_integration_tests(typescript: None, with_tokens: Service) -> None:
    """Every route, and the Worker's promise, against a real service."""
    tests = sorted(str(p) for p in (TYPESCRIPT / "dist" / "test" / "integration").glob("*.test.js"))
    done = run(
        [system.need(NODE), "--test", *tests],
        TYPESCRIPT,
        LEASEQ_TEST_URL=with_tokens.url,
        LEASEQ_TEST_TOKEN=TOKEN,
    )
    assert "# skipped 0" in done.stdout, done.stdout[-3000:]
    assert passed(done) >= 12


def test_types_are_generated_from_the_service_document(typescript: None, service: Service) -> None:
    """src/openapi.ts is what openapi-typescript makes of this service's /openapi.json."""
    script = str(TYPESCRIPT / "scripts" / "generate.mjs")
    done = run([system.need(NODE), script, f"{service.url}/openapi.json", "--check"], TYPESCRIPT)
    assert done.returncode == 0, done.stdout + done.stderr


def readme_example() -> str:
    """The README's first TypeScript block, as written."""
    text = (TYPESCRIPT / "README.md").read_text()
    found = re.search(r"^```ts\n(.*?)^```", text, re.M | re.S)
    assert found, "the README has no ```ts example"
    return found.group(1)


def test_the_readme_example_runs_as_written(
    typescript: None, service: Service, tmp_path: Path
) -> None:
    """Compiled with ``tsc --strict`` against the built package, then run: it pushes two
    leads and a worker drains them."""
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "leaseq").symlink_to(TYPESCRIPT)
    (tmp_path / "example.ts").write_text(readme_example())
    (tmp_path / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    config = {
        "compilerOptions": {
            "strict": True,
            "target": "ES2022",
            "module": "NodeNext",
            "moduleResolution": "NodeNext",
            "types": ["node"],
            "typeRoots": [str(TYPESCRIPT / "node_modules" / "@types")],
        },
        "files": ["example.ts"],
    }
    (tmp_path / "tsconfig.json").write_text(json.dumps(config))
    tsc = str(TYPESCRIPT / "node_modules" / ".bin" / "tsc")
    compiled = run([tsc, "-p", "tsconfig.json"], tmp_path)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    ran = run([system.need(NODE), "example.js"], tmp_path, LEASEQ_URL=service.url)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.strip().splitlines()[-1] == "done 2, failed 0"
    with service.client() as http:
        assert http.get("/sessions/emails/stats").json()["done"] == 2


def test_the_package_packs_and_installs_offline(typescript: None, tmp_path: Path) -> None:
    """``npm pack`` offline, then installed offline in an empty project: it needs nothing
    from the registry (no runtime dependency) and exports the client, worker and fence."""
    npm = system.need(NPM)
    packed = run([npm, "pack", "--offline", "--pack-destination", str(tmp_path)], TYPESCRIPT)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    [tarball] = tmp_path.glob("leaseq-*.tgz")
    with tarfile.open(tarball) as archive:
        names = set(archive.getnames())
    assert {"package/dist/index.js", "package/dist/index.d.ts", "package/README.md"} <= names
    assert not any("/test/" in n or "/conformance/" in n or "/src/" in n for n in names), names
    manifest = json.loads((TYPESCRIPT / "package.json").read_text())
    assert "dependencies" not in manifest
    project = tmp_path / "project"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"type": "module", "private": True}))
    installed = run([npm, "install", "--offline", "--no-audit", "--no-fund", str(tarball)], project)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    probe = (
        "import * as m from 'leaseq';"
        "console.log(['Client','Worker','verifyFence','LeaseLost','QuotaExceeded']"
        ".every((n) => typeof m[n] === 'function'))"
    )
    imported = run([system.need(NODE), "--input-type=module", "-e", probe], project)
    assert imported.stdout.strip() == "true", imported.stdout + imported.stderr


def test_without_npm_the_tests_skip_saying_how_to_get_it(tmp_path: Path) -> None:
    """With no npm on the path a test of this client skips with one line saying what to
    install; under CI's switch the same line fails it."""
    nowhere = tmp_path / "empty-path"
    nowhere.mkdir()
    test = "tests/clients/test_typescript.py::test_unit_tests"
    argv = [sys.executable, "-m", "pytest", "-rsE", "-p", "no:cacheprovider", "--run-slow", test]
    skipped = run(argv, ROOT, **{system.PATH_ENV: str(nowhere)})
    line = "npm is not installed: apt-get install -y npm"
    assert f"SKIPPED [1] {test.split('::')[0]}" in skipped.stdout, skipped.stdout[-3000:]
    assert line in skipped.stdout
    failed = run(argv, ROOT, **{system.PATH_ENV: str(nowhere), system.REQUIRE_ENV: "1"})
    assert failed.returncode != 0
    assert f"{line} ({system.REQUIRE_ENV}=1)" in failed.stdout, failed.stdout[-3000:]
