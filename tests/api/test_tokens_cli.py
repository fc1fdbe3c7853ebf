"""``leaseq tokens create``, ``list`` and ``revoke`` against a real ``leaseq serve``: the
worked example of the README (one tenant's worker, one tenant's producer, one operator),
one-line errors and exit codes."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.support.serving import Services, leaseq

pytestmark = pytest.mark.service

BOOT = "boot-token"


def test_tokens_create_list_revoke(services: Services, database_url: str) -> None:
    service = services.start("--token", BOOT, database_url=database_url)
    env = {"LEASEQ_URL": service.url, "LEASEQ_TOKEN": BOOT}
    made = {}
    for name, role, pattern in [
        ("tenant-a-workers", "worker", "tenant-a:*"),
        ("tenant-a-producer", "producer", "tenant-a:*"),
        ("ops", "operator", "*"),
    ]:
        args = ["tokens", "create", "--role", role, "--sessions", pattern, "--name", name]
        done = leaseq(*args, "--expires", "30d", env=env)
        assert done.returncode == 0, done.stderr
        [secret] = done.stdout.split()
        assert secret.startswith("lq_") and "shown this once" in done.stderr
        made[name] = secret

    def call(name: str, method: str, path: str, **body: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {made[name]}"}
        return httpx.request(method, service.url + path, json=body or None, headers=headers)

    assert call("tenant-a-producer", "POST", "/sessions/tenant-a:1/leads", leads=[{"payload": {}}])
    assert call("tenant-a-producer", "POST", "/lease", owner="p").status_code == 403
    leased = call("tenant-a-workers", "POST", "/lease", owner="w").json()["leases"]
    assert [lease["lead"]["session"] for lease in leased] == ["tenant-a:1"]
    assert call("tenant-a-workers", "POST", "/sessions/tenant-b:1/leads").status_code == 403

    # The operator manages tokens too (its pattern is *).
    listed = leaseq("tokens", "list", "--json", env={**env, "LEASEQ_TOKEN": made["ops"]})
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {row["name"] for row in rows} == set(made)
    assert all(row["expires_at"] and "token" not in row for row in rows)
    assert not any(secret in listed.stdout for secret in made.values())

    revoked = leaseq("tokens", "revoke", "tenant-a-workers", env=env)
    assert (revoked.returncode, revoked.stdout.strip()) == (0, "revoked tenant-a-workers")
    assert call("tenant-a-workers", "POST", "/lease", owner="w").status_code == 401

    refused = {
        ("create", "--role", "admin", "--sessions", "a"): 2,
        ("create", "--role", "worker", "--sessions", "a*b"): 2,
        ("create", "--role", "worker", "--sessions", "a", "--expires", "soon"): 2,
        ("create", "--role", "worker", "--sessions", "a", "--name", "a b"): 2,
        ("create", "--role", "worker", "--sessions", "a", "--name", "ops"): 1,  # the service's
        ("revoke", "nobody"): 1,
    }
    for args, code in refused.items():
        done = leaseq("tokens", *args, env=env)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "error" in done.stderr, done.stderr
    producer = {**env, "LEASEQ_TOKEN": made["tenant-a-producer"]}
    done = leaseq("tokens", "list", env=producer)
    assert done.returncode == 1 and "forbidden" in done.stderr, done.stderr
    done = leaseq("tokens", "list", env={**env, "LEASEQ_TOKEN": "wrong"})
    assert done.returncode == 1 and "LEASEQ_TOKEN" in done.stderr, done.stderr
