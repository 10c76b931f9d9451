"""The docker compose fleet, checked without a Docker engine.

``docker-compose config`` (Debian's docker-compose package) validates and resolves the
file; the resolved services are then checked against the package: every ``copytrack``
command is a registered subcommand whose options click accepts, and ``celery -A`` names an
importable Celery app. A renamed command or option fails here, not in production.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from importlib import import_module
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from celery import Celery

from copytrack.cli import main
from tracker.core.config import BY_VARIABLE, deploy_table
from tracker.core.store import INDEXES

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "docker-compose.yml"
TABLES_SCRIPT = ROOT / "scripts" / "settings_tables.py"
SERVICES = {"mongo", "redis", "worker", "beat", "crawler", "admin", "flower", "searxng"}
SERVERS = {"mongo", "redis"}
#: Started with `--profile discovery` only: the meta-search engine discover campaigns ask.
SEARCH = {"searxng"}
APP_SERVICES = SERVICES - SERVERS - SEARCH
# Variables the compose file interpolates besides the COPYTRACK_* settings.
COMPOSE_VARIABLES = ("FLOWER_BASIC_AUTH", "FLOWER_PUBLISH", "ADMIN_PUBLISH", "SEARXNG_SECRET")


def _compose_config(**variables: str) -> subprocess.CompletedProcess[str]:
    """``docker-compose config`` on a clean environment plus ``variables``."""
    binary = shutil.which("docker-compose")
    if binary is None:
        pytest.skip(
            "docker-compose is not installed: `apt-get install docker-compose` "
            "(Debian's package; the project's set-up installs it)"
        )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COPYTRACK_", "COMPOSE_", "DOCKER_")) and k not in COMPOSE_VARIABLES
    }
    return subprocess.run(
        [binary, "--file", str(COMPOSE_FILE), "--project-directory", str(ROOT), "config"],
        env={**env, **variables},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _services(**variables: str) -> dict[str, dict[str, Any]]:
    done = _compose_config(FLOWER_BASIC_AUTH="ops:secret", **variables)
    assert done.returncode == 0, f"docker-compose config rejected the file:\n{done.stderr}"
    return dict(yaml.safe_load(done.stdout)["services"])


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    """The services as docker-compose resolves them with the default settings."""
    return _services()


def test_the_fleet_is_exactly_these_services(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == SERVICES


def test_server_images_are_pinned_and_redis_keeps_the_index_compact_and_durable(
    services: dict[str, dict[str, Any]],
) -> None:
    assert re.fullmatch(r"mongo:7\.0\.\d+", services["mongo"]["image"])
    assert re.fullmatch(r"redis:7\.2\.\d+", services["redis"]["image"])
    command = services["redis"]["command"]
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert command[0] == "redis-server"
    assert options["--appendonly"] == "yes"
    assert options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    for server in SERVERS:
        assert services[server]["volumes"], f"{server} keeps its data in a volume"
        assert "ports" not in services[server], f"{server} must not be published"


def _healthcheck_code(test: list[str]) -> str | None:
    """The Python source of a ``python -c`` healthcheck, else None."""
    return test[3] if test[:3] == ["CMD", "python", "-c"] else None


def test_restart_policies_healthchecks_and_start_order(
    services: dict[str, dict[str, Any]],
) -> None:
    for name, service in services.items():
        assert service["restart"] == "unless-stopped", name
        # beat has no port to probe; a crash ends its container and the policy restarts it.
        if name != "beat":
            test = service["healthcheck"]["test"]
            code = _healthcheck_code(test)
            if code is not None:
                compile(code, f"<healthcheck of {name}>", "exec")
    for name in APP_SERVICES:
        assert services[name]["depends_on"] == {
            "mongo": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }, name
    assert "mongosh" in services["mongo"]["healthcheck"]["test"]
    assert "/healthz" in _healthcheck_code(services["admin"]["healthcheck"]["test"])
    assert "/healthcheck" in _healthcheck_code(services["flower"]["healthcheck"]["test"])


def test_configuration_comes_from_the_environment(services: dict[str, dict[str, Any]]) -> None:
    for name in APP_SERVICES:
        env = services[name]["environment"]
        missing = set(BY_VARIABLE) - set(env)
        assert not missing, f"{name} lacks {sorted(missing)}: add them to x-copytrack-env"
        assert env["COPYTRACK_MONGO_URL"].startswith("mongodb://mongo:27017/")
        assert env["COPYTRACK_REDIS_URL"].startswith("redis://redis:6379/")
        # Runs crawl on the crawler service, wherever they are started.
        assert env["COPYTRACK_CRAWL_DISPATCH"] == "queue"
    configured = _services(
        COPYTRACK_REDIS_URL="redis://cache.internal:6379/2",
        COPYTRACK_WORKER_QUEUES="scan",
        ADMIN_PUBLISH="0.0.0.0:80",
    )
    assert configured["beat"]["environment"]["COPYTRACK_REDIS_URL"] == (
        "redis://cache.internal:6379/2"
    )
    assert configured["worker"]["command"][-2:] == ["--queues", "scan"]
    assert configured["admin"]["ports"][0].startswith("0.0.0.0:80:8000")


def test_workers_scale_and_consume_their_queues(services: dict[str, dict[str, Any]]) -> None:
    for name in ("worker", "crawler"):
        # `--scale worker=N` needs no fixed container name nor host port.
        assert "container_name" not in services[name] and "ports" not in services[name]
    assert services["worker"]["command"][-2:] == ["--queues", "ingest,scan,maintenance"]
    assert services["crawler"]["command"][-2:] == ["--queues", "crawl"]
    # Its crawl logs go to the volume of the beat's and the admin's.
    assert services["crawler"]["volumes"] == services["beat"]["volumes"]


def test_admin_and_flower_listen_on_loopback_and_flower_needs_credentials(
    services: dict[str, dict[str, Any]],
) -> None:
    assert [p.split(":")[0] for p in services["admin"]["ports"]] == ["127.0.0.1"]
    assert [p.split(":")[0] for p in services["flower"]["ports"]] == ["127.0.0.1"]
    refused = _compose_config()
    assert refused.returncode != 0
    assert "FLOWER_BASIC_AUTH" in refused.stderr


def _check_copytrack_command(args: list[str], service: str) -> None:
    """Resolve ``copytrack ARGS`` through click and parse its options; nothing runs."""
    line = " ".join(["copytrack", *args])
    parent = click.Context(main, info_name="copytrack")
    command: click.Command = main
    while isinstance(command, click.Group):
        if not args:
            pytest.fail(f"service {service}: `{parent.command_path}` needs a subcommand")
        name, args = args[0], args[1:]
        sub = command.get_command(parent, name)
        if sub is None:
            registered = ", ".join(sorted(command.list_commands(parent)))
            pytest.fail(
                f"service {service}: `{parent.command_path} {name}` is not a registered "
                f"subcommand of copytrack.cli.main (registered: {registered})"
            )
        command, parent = sub, click.Context(sub, info_name=name, parent=parent)
    try:
        command.make_context(parent.info_name, list(args), parent=parent.parent)
    except click.ClickException as err:
        pytest.fail(f"service {service}: `{line}` rejected: {err.format_message()}")


def test_every_service_command_exists_in_the_package(
    services: dict[str, dict[str, Any]],
) -> None:
    image_lock = (ROOT / "requirements" / "image.lock").read_text()
    for name in sorted(APP_SERVICES):
        program, *args = services[name]["command"]
        if program == "copytrack":
            _check_copytrack_command(args, name)
        elif program == "celery":
            assert args[0] == "-A", name
            module = import_module(args[1])
            assert isinstance(module.app, Celery), f"{args[1]}.app is not a Celery app"
            # Celery subcommands other than its own come from packages the image installs.
            if args[2] == "flower":
                assert re.search(r"^flower==[\d.]+ ", image_lock, re.M), "the image installs Flower"
        else:
            pytest.fail(f"service {name} runs {program!r}, neither copytrack nor celery")


def test_the_fleet_runs_the_image_built_here_as_built(
    services: dict[str, dict[str, Any]],
) -> None:
    for name in APP_SERVICES:
        service = services[name]
        assert Path(service["build"]["context"]).resolve() == ROOT, name
        assert service["pull_policy"] == "build", f"{name} could run a pulled image"
        # Nothing mounted over the installed package: only the data volume.
        for volume in service.get("volumes", []):
            assert volume.split(":")[1] == "/data", f"{name} mounts {volume}"


def test_the_production_indexes_are_listed_in_the_deployment_guide() -> None:
    rows = {re.sub(r"\s+", " ", line) for line in (ROOT / "docs" / "deploy.md").open()}
    for collection, specs in INDEXES.items():
        for keys, options in specs:
            arrows = ", ".join(f"`{field}` {'↑' if order == 1 else '↓'}" for field, order in keys)
            row = re.sub(r"\s+", " ", f"| `{collection}` | {arrows} | {', '.join(options)} | ")
            assert row in rows, f"docs/deploy.md's table of indexes lacks {row}"


def test_the_image_runs_unprivileged_and_holds_no_secrets() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim", dockerfile, re.MULTILINE)
    users = re.findall(r"^USER (\S+)", dockerfile, re.MULTILINE)
    assert users and users[-1] not in ("root", "0")
    assert not re.search(r"^(ENV|ARG)\b.*(PASSWORD|SECRET|TOKEN)", dockerfile, re.M | re.I)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".env", ".venv", ".copytrack"} <= set(ignored)


def test_the_deployment_guide_shows_the_generated_table_of_every_setting() -> None:
    spec = importlib.util.spec_from_file_location("settings_tables", TABLES_SCRIPT)
    assert spec and spec.loader
    tables = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tables)
    guide = (ROOT / "docs" / "deploy.md").read_text()
    assert deploy_table(tables.fleet_environment()) in guide, "run `make docs`"
    missing = [name for name in BY_VARIABLE if f"| `{name}` |" not in guide]
    assert not missing, f"docs/deploy.md does not document {missing}"
