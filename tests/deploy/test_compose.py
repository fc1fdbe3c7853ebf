"""docker-compose.yml: valid by the Compose Specification, and saying only what leaseq accepts.

No Docker engine (nor ``docker compose``) runs here: the file is validated
against the Compose Specification's JSON schema, vendored as
``tests/deploy/compose-spec.json`` (see tests/deploy/README.md for its
source), and every command and ``LEASEQ_*`` variable of the leaseq services is
parsed by leaseq itself. tests/deploy/test_entrypoint.py runs them.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
from alembic.config import CommandLine
from sqlalchemy.engine import make_url

from app.config import Settings
from leaseq.cli.root import command_tree
from tests.deploy.compose import (
    ROOT,
    ImageRun,
    dockerfile_stages,
    entrypoint_verbs,
    environment_of,
    exec_form,
    image_runs,
    image_stage,
    load_compose,
    run_of,
)

SCHEMA = Path(__file__).resolve().parent / "compose-spec.json"


def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text())
    # The file names draft 2019-09 by a URI jsonschema does not recognise: name it here.
    jsonschema.Draft201909Validator.check_schema(schema)
    return jsonschema.Draft201909Validator(schema)


def test_the_compose_file_is_valid_by_the_compose_specification() -> None:
    errors = [f"{e.json_path}: {e.message}" for e in validator().iter_errors(load_compose())]
    assert errors == []


def test_the_schema_check_catches_a_broken_compose_file() -> None:
    broken = copy.deepcopy(load_compose())
    broken["services"]["api"]["deploy"]["replicas"] = "two"
    broken["services"]["api"]["depends_on"]["migrate"]["condition"] = "service_done"
    broken["services"]["postgres"]["helthcheck"] = {}
    assert len(list(validator().iter_errors(broken))) == 3


def test_postgres_migrations_and_two_api_replicas_start_in_order() -> None:
    services = load_compose()["services"]
    postgres = services["postgres"]
    assert postgres["healthcheck"]["test"][0] == "CMD-SHELL"
    assert "pg_isready" in postgres["healthcheck"]["test"][1]
    [volume] = postgres["volumes"]
    assert volume.split(":")[0] in load_compose()["volumes"]  # a named volume: data survives

    migrate, api = services["migrate"], services["api"]
    assert run_of("migrate").command == ["alembic", "upgrade", "head"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert run_of("api").command[0] == "serve"
    assert api["deploy"]["replicas"] == 2
    assert api["depends_on"] == {"migrate": {"condition": "service_completed_successfully"}}
    # The migration goes over the direct connection, never through a pooler, as the
    # user and to the database the postgres service creates.
    url = make_url(environment_of(migrate)["LEASEQ_DATABASE_URL"])
    assert url.host == "postgres"
    created = postgres["environment"]
    assert (url.username, url.password, url.database) == (
        created["POSTGRES_USER"],
        created["POSTGRES_PASSWORD"],
        created["POSTGRES_DB"],
    )
    users = (ROOT / "deploy" / "pgbouncer" / "userlist.txt").read_text()
    assert f'"{url.username}" "{url.password}"' in users  # PgBouncer logs in as the same user
    assert "profiles" not in api and "profiles" not in migrate


def test_the_profiles_add_pgbouncer_and_a_demo() -> None:
    services = load_compose()["services"]
    profiles = {name: s.get("profiles", []) for name, s in services.items()}
    assert profiles["pgbouncer"] == ["pgbouncer"] and profiles["api-pooled"] == ["pgbouncer"]
    assert profiles["demo-push"] == ["demo"] and profiles["demo-worker"] == ["demo"]
    names = {stage.name for stage in dockerfile_stages()[1]}
    assert services["pgbouncer"]["build"]["target"] in names

    pooled = run_of("api-pooled").environment
    assert make_url(pooled["LEASEQ_DATABASE_URL"]).host == "pgbouncer"
    assert make_url(pooled["LEASEQ_LISTEN_DATABASE_URL"]).host == "postgres"
    assert Settings(**settings_of(run_of("api-pooled"))).database_pooled

    assert run_of("demo-push").command[0] == "push"
    assert run_of("demo-worker").command[0] == "worker"
    assert services["demo-worker"]["deploy"]["replicas"] == 2
    for demo in ("demo-push", "demo-worker"):
        assert services[demo]["depends_on"] == {"api": {"condition": "service_healthy"}}


def test_the_citus_profile_runs_an_api_on_a_coordinator_and_two_workers() -> None:
    """The nodes come up, the workers are added, the migrations distribute the tables on the
    coordinator, then an API serves from it: each step after the one before."""
    services = load_compose()["services"]
    cluster = ["citus-coordinator", "citus-worker1", "citus-worker2"]
    for name in [*cluster, "citus-nodes", "migrate-citus", "api-citus"]:
        assert services[name]["profiles"] == ["citus"], name
    assert {services[name]["image"] for name in [*cluster, "citus-nodes"]} == {
        "citusdata/citus:13.2"
    }
    added = " ".join(services["citus-nodes"]["command"])
    assert all(f"citus_add_node('{worker}', 5432)" in added for worker in cluster[1:])
    assert set(services["citus-nodes"]["depends_on"]) == set(cluster)
    assert services["migrate-citus"]["depends_on"] == {
        "citus-nodes": {"condition": "service_completed_successfully"}
    }
    assert run_of("migrate-citus").command == ["alembic", "upgrade", "head"]
    assert run_of("api-citus").command[0] == "serve"
    door = make_url(run_of("api-citus").environment["LEASEQ_DATABASE_URL"])
    assert door.host == "citus-coordinator"
    assert services["api-citus"]["depends_on"] == {
        "migrate-citus": {"condition": "service_completed_successfully"}
    }


def test_every_url_names_a_compose_service_and_the_pgbouncer_port() -> None:
    services = load_compose()["services"]
    ini = (ROOT / "deploy" / "pgbouncer" / "pgbouncer.ini").read_text()
    pooled_databases = re.findall(r"^(\w+) = host=postgres port=5432 dbname=(\w+)", ini, re.M)
    for run in image_runs():
        for key, value in run.environment.items():
            if key.endswith("DATABASE_URL"):
                url = make_url(value)
                assert url.host in services, (run.service, key)
                if url.host == "pgbouncer":  # the pooler's port, and a database it serves
                    assert f"listen_port = {url.port}" in ini
                    assert (url.database, url.database) in pooled_databases
                elif url.host == "citus-coordinator":  # the cluster's door
                    assert (url.port, url.database) == (5432, "leaseq")
                else:
                    assert (url.host, url.port, url.database) == ("postgres", 5432, "leaseq")
            elif key == "LEASEQ_URL":
                assert re.fullmatch(r"http://api:8000", value)
                assert "8000" in services["api"]["ports"][0].split(":")[-1]


def settings_of(run: ImageRun) -> dict[str, Any]:
    """The run's LEASEQ_* variables that are Settings, as Settings field values."""
    fields = {f"LEASEQ_{name.upper()}": name for name in Settings.model_fields}
    return {fields[k]: v for k, v in run.environment.items() if k in fields}


def cli_envvars(command: Any) -> set[str]:
    """Every environment variable an option of ``command`` (or of its subcommands) reads."""
    found = set()
    for param in command.params:
        envvar = getattr(param, "envvar", None)
        found |= {envvar} if isinstance(envvar, str) else set(envvar or ())
    for sub in getattr(command, "commands", {}).values():
        found |= cli_envvars(sub)
    return found


@pytest.mark.parametrize("run", image_runs(), ids=lambda run: run.service)
def test_every_leaseq_variable_is_a_setting_or_a_cli_option(run: ImageRun) -> None:
    known = {f"LEASEQ_{name.upper()}" for name in Settings.model_fields}
    known |= cli_envvars(command_tree())
    used = {key for key in run.environment if key.startswith("LEASEQ_")}
    assert used and used <= known, used - known
    Settings(**settings_of(run))  # and each value is one the setting accepts


def test_the_entrypoint_hands_every_leaseq_verb_to_leaseq() -> None:
    verbs = entrypoint_verbs() - {"--help"}
    assert verbs == set(cli_commands())


def cli_commands() -> set[str]:
    command: Any = command_tree()
    return set(command.commands)


@contextmanager
def parsed(argv: list[str], environment: dict[str, str]) -> Iterator[Any]:
    """``leaseq ARGV`` parsed (options, types, required ones, the environment), not run:
    the command's context. Raises the CLI's usage errors."""
    with ExitStack() as stack, pytest.MonkeyPatch.context() as env:
        for key, value in environment.items():
            env.setenv(key, value)
        command: Any = command_tree()
        ctx: Any = None
        name, args = "leaseq", list(argv)
        while hasattr(command, "commands"):  # a group: the next argument names its command
            ctx = stack.enter_context(
                command.make_context(name, [], parent=ctx, resilient_parsing=True)
            )
            name, args = args[0], args[1:]
            found = command.get_command(ctx, name)
            assert found is not None, f"leaseq has no command {name}"
            command = found
        yield stack.enter_context(command.make_context(name, args, parent=ctx))


@pytest.mark.parametrize("run", image_runs(), ids=lambda run: run.service)
def test_every_command_is_one_the_image_can_run(run: ImageRun) -> None:
    """Through the image's entrypoint: a leaseq verb parses as leaseq, anything else is alembic."""
    assert run.argv[:1] == exec_form(image_stage().last("ENTRYPOINT"))
    command = [ROOT.as_posix() + a[4:] if a.startswith("/app/") else a for a in run.command]
    if command[0] in entrypoint_verbs():
        with parsed(command, run.environment) as ctx:
            assert ctx.command.name == command[-1] if command[0] == "db" else command[0]
            if command[0] == "worker":
                [program, script] = ctx.params["command"]
                assert program == "python" and Path(script).is_file()
    else:
        assert command[0] == "alembic", f"{run.service} runs {command[0]}, not leaseq"
        options = CommandLine().parser.parse_args(command[1:])  # exits on a bad command line
        assert options.cmd[0].__name__ == command[1]


def test_a_bad_command_does_not_parse() -> None:
    with pytest.raises(Exception, match="No such option"), parsed(["worker", "--sesion", "x"], {}):
        pass
    with pytest.raises(typer.BadParameter), parsed(["serve", "--port", "eighty"], {}):
        pass
    with pytest.raises(AssertionError, match="no command"), parsed(["serv"], {}):
        pass
