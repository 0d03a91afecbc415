"""The deployment files say what the README promises: docker-compose.yml runs
PostgreSQL, Redis, migrations, the web server, a Celery worker and beat, and a
Spark master and worker sharing Strata's data volume; the Dockerfile brings Java
and the project; `make test` is what CI runs.

There is no Docker engine here, so these read the files rather than run them.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
APP_SERVICES = ("migrate", "web", "worker", "beat")
DATA_SERVICES = ("web", "worker", "beat", "spark-worker")
APP_ENV = {
    "DATABASE_URL": "postgres://strata:strata@postgres:5432/strata",
    "REDIS_URL": "redis://redis:6379/0",
    "SPARK_MASTER": "spark://spark-master:7077",
    "STRATA_DATA_DIR": "/data",
    "STRATA_INPUT_ROOTS": "/data/input",
    "DJANGO_DEBUG": "0",
}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


def command_of(service: dict) -> str:
    command = service.get("command")
    assert command, "service has no command"
    return command if isinstance(command, str) else shlex.join(command)


def command_words(service: dict) -> str:
    """The command with quoting and `sh -c` wrapping flattened into plain words."""
    return " ".join(command_of(service).replace("'", " ").replace('"', " ").split())


def env_of(service: dict) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def mounts_of(service: dict) -> list[tuple[str, str]]:
    mounts = []
    for volume in service.get("volumes") or []:
        if isinstance(volume, str):
            source, target = volume.split(":")[:2]
        else:
            source, target = volume["source"], volume["target"]
        mounts.append((source, target))
    return mounts


def depends_on(service: dict) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def test_compose_has_every_service(services):
    assert set(services) >= {
        "postgres",
        "redis",
        "migrate",
        "web",
        "worker",
        "beat",
        "spark-master",
        "spark-worker",
    }


def test_postgres_is_16_with_a_healthcheck_and_the_strata_database(services):
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:16")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    env = env_of(postgres)
    assert env["POSTGRES_USER"] == "strata"
    assert env["POSTGRES_PASSWORD"] == "strata"
    assert env["POSTGRES_DB"] == "strata"


def test_redis_is_7_with_a_healthcheck(services):
    assert services["redis"]["image"].startswith("redis:7")
    assert "ping" in " ".join(services["redis"]["healthcheck"]["test"])


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_run_the_project_image_with_its_configuration(services, name):
    service = services[name]
    assert service.get("build") == "." or service.get("build", {}).get("context") == "."
    env = env_of(service)
    for key, value in APP_ENV.items():
        assert env.get(key) == value, f"{name}: {key}"
    assert "DJANGO_SECRET_KEY" in env["DJANGO_SECRET_KEY"], "the key comes from the environment"


def test_each_service_runs_its_command(services):
    assert "python manage.py migrate --noinput" in command_words(services["migrate"])
    web = command_words(services["web"])
    assert "gunicorn console.wsgi:application" in web
    assert "--bind 0.0.0.0:8000" in web
    assert "collectstatic --noinput" in web
    assert "celery -A console worker -P threads -c $${STRATA_TASK_SLOTS} -Q strata" in (
        command_words(services["worker"])
    )
    assert "celery -A console beat" in command_words(services["beat"])
    assert "spark-class org.apache.spark.deploy.master.Master" in command_words(
        services["spark-master"]
    )
    assert (
        "spark-class org.apache.spark.deploy.worker.Worker spark://spark-master:7077"
        in command_words(services["spark-worker"])
    )


def test_spark_runs_the_same_image_as_the_driver(services):
    # The driver (in `worker`) and the executors must run the same Spark and Python.
    for name in ("spark-master", "spark-worker"):
        assert services[name]["image"] == services["worker"]["image"]


@pytest.mark.parametrize("name", DATA_SERVICES)
def test_data_volume_is_shared_by_drivers_and_executors(compose, services, name):
    assert ("strata-data", "/data") in mounts_of(services[name])
    assert "strata-data" in compose["volumes"]


def test_services_start_in_order(services):
    assert depends_on(services["migrate"]) == {"postgres": "service_healthy"}
    for name in ("web", "worker", "beat"):
        deps = depends_on(services[name])
        assert deps.get("migrate") == "service_completed_successfully", name
        assert deps.get("redis") == "service_healthy", name
    assert "spark-master" in depends_on(services["worker"])
    assert "spark-master" in depends_on(services["spark-worker"])


def test_web_publishes_port_8000(services):
    assert any(str(port).endswith("8000:8000") for port in services["web"]["ports"])


def test_dockerfile_installs_java_and_the_project():
    text = (ROOT / "Dockerfile").read_text()
    lines = [line.strip() for line in text.splitlines()]
    assert any(line.startswith("FROM python:3.11-slim") for line in lines)
    assert "openjdk-17-jre-headless" in text
    assert "pip install ." in text
    assert "JAVA_HOME" in text
    assert any(line.startswith("CMD") and "gunicorn" in line for line in lines)
    # The compose file's Spark commands need this path.
    assert "/opt/spark" in text


def test_makefile_has_run_and_test_targets():
    text = (ROOT / "Makefile").read_text()
    targets = {line.split(":")[0] for line in text.splitlines() if line and line[0].isalpha()}
    assert {"run", "test", "lint", "bench", "clean"} <= targets
    assert "ruff check ." in text
    assert "pytest $(PYTEST_ARGS)" in text
    assert "manage.py strata_run" in text


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_ruff_then_pytest():
    result = subprocess.run(
        ["make", "-n", "-W", "pyproject.toml", "test"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    out = result.stdout
    assert "ruff check ." in out
    assert out.index("ruff check .") < out.index("pytest")
    assert "pip install" in out and "[test]" in out


def test_ci_runs_make_test_and_stops_on_failure():
    text = (ROOT / ".ci" / "run").read_text()
    lines = [line.strip() for line in text.splitlines()]
    assert "set -euo pipefail" in lines
    # A command line, not a comment or a message that mentions it.
    assert any(
        line == "make test" or line.startswith(("make test ", "exec make test")) for line in lines
    )
    assert "DATABASE_URL=" in text and "strata_ci" in text
    assert "REDIS_URL=" in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_ci_script_parses():
    subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")], check=True)


def test_worker_runs_strata_task_slots_tasks_at_once_two_by_default(services):
    # `$$` escapes compose's own interpolation: the shell expands the variable, which
    # compose sets from the host's STRATA_TASK_SLOTS or 2; the web server reads the
    # same value to show the slots.
    for name in ("worker", "web"):
        assert env_of(services[name])["STRATA_TASK_SLOTS"] == "${STRATA_TASK_SLOTS:-2}", name
    assert "-c $${STRATA_TASK_SLOTS}" in command_words(services["worker"])


def test_task_slots_are_threads_sharing_one_spark_driver(services):
    # One Spark application per worker container: the slots share its executors.
    assert "-P threads" in command_words(services["worker"])
    assert "SPARK_MASTER_OPTS" not in env_of(services["spark-master"])
