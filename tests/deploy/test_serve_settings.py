"""How ``leaseq serve`` builds its Settings and hands them to its workers (in-process)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from app.api import serve
from app.config import Settings
from leaseq.cli import app


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``leaseq serve`` would run with: app.api.serve.run replaced by a recorder."""
    for key in list(os.environ):
        if key.startswith("LEASEQ_"):
            monkeypatch.delenv(key)
    seen: dict[str, Any] = {}

    def run(settings: Settings, options: serve.ServeOptions, *args: Any, **kwargs: Any) -> None:
        seen["settings"], seen["options"] = settings, options

    monkeypatch.setattr(serve, "run", run)
    return seen


def invoke(*args: str, env: dict[str, str] | None = None) -> None:
    result = CliRunner().invoke(app, ["serve", *args], env=env)
    assert result.exit_code == 0, result.output


def test_a_flag_wins_over_its_variable_which_wins_over_the_default(
    captured: dict[str, Any],
) -> None:
    env = {"LEASEQ_PORT": "9001", "LEASEQ_LEASE_TTL_S": "10", "LEASEQ_POOL_SIZE": "3"}
    invoke(
        "--port",
        "9002",
        "--no-ledger",
        "--no-group-commit",
        "--database-url",
        "postgresql://u@h/db",
        env=env,
    )
    settings: Settings = captured["settings"]
    assert settings.port == 9002  # flag over variable
    assert settings.lease_ttl_s == 10  # variable over default
    assert settings.pool_size == 3  # a variable without a flag
    assert settings.workers == 1 and settings.host == "127.0.0.1"  # defaults
    assert settings.ledger is False and settings.group_commit is False
    assert settings.database_url == "postgresql://u@h/db"
    options: serve.ServeOptions = captured["options"]
    assert options.migrate is False and options.log_level == "info"


def test_tracing_is_off_unless_asked_by_its_flag_or_variable(captured: dict[str, Any]) -> None:
    invoke()
    assert captured["settings"].tracing is False
    invoke("--tracing")
    assert captured["settings"].tracing is True
    invoke(env={"LEASEQ_TRACING": "on"})
    assert captured["settings"].tracing is True
    invoke("--no-tracing", env={"LEASEQ_TRACING": "on"})
    assert captured["settings"].tracing is False


def test_tokens_from_both_flags(captured: dict[str, Any]) -> None:
    invoke("--api-tokens", "a,b", "--token", "c", "--token", "d", env={"LEASEQ_API_TOKENS": "z"})
    assert captured["settings"].token_list == ["a", "b", "c", "d"]
    invoke("--token", "c", env={"LEASEQ_API_TOKENS": "z"})
    assert captured["settings"].token_list == ["c"]
    invoke(env={"LEASEQ_API_TOKENS": "z"})
    assert captured["settings"].token_list == ["z"]


def test_a_bad_value_is_one_line(captured: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["serve", "--lease-ttl", "0"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "error: lease_ttl_s: Input should be greater than 0"
    ]
    result = CliRunner().invoke(app, ["serve", "--log-level", "loud"])
    assert result.exit_code == 2 and "--log-level must be one of" in result.output


def test_the_environment_rebuilds_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(
        database_url="postgresql://u:pw@h:5433/db?sslmode=require",
        data_dir=Path("/srv/leaseq"),
        lease_ttl_s=42.5,
        api_tokens="a,b",
        port=1234,
        workers=3,
        ledger=False,
        group_commit=False,
    )
    environ: dict[str, str] = {"LEASEQ_LISTEN_DATABASE_URL": "postgresql://stale"}
    serve.export(settings, environ)
    assert "LEASEQ_LISTEN_DATABASE_URL" not in environ  # None unsets
    for key in list(os.environ):
        if key.startswith("LEASEQ_"):
            monkeypatch.delenv(key)
    for key, value in environ.items():
        monkeypatch.setenv(key, value)
    assert Settings() == settings


def test_connection_limit_stays_under_the_open_file_limit() -> None:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = serve.limit_concurrency(Settings())
    assert 0 < limit <= Settings().max_waiters + serve.CONNECTION_HEADROOM
    if soft != resource.RLIM_INFINITY:
        assert limit < soft
