"""The container's recipe, followed without a container: the Dockerfile's entrypoint and
environment and compose.yaml's worker command, environment and secrets (made by
deploy/make-secrets.sh) start two workers on a local Postgres; they are ready, serve
runs with the token from the token file, export metrics, and stop cleanly on SIGTERM."""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest
import yaml

from .conftest import ROOT, Served

pytestmark = pytest.mark.timeout(180)
#: Postgres connections one worker holds, peers aside (measured: docs/deployment.md).
CONNECTIONS_PER_WORKER = 7


def joined() -> str:
    """The Dockerfile, its continued lines joined."""
    return (ROOT / "Dockerfile").read_text().replace("\\\n", " ")


def dockerfile() -> tuple[list[str], dict[str, str], str]:
    """The final stage's ENTRYPOINT, ENV and USER."""
    final = joined().split("\nFROM ")[-1]
    entry, env, user = [], {}, ""
    for line in final.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENTRYPOINT":
            entry = json.loads(rest)
        elif word == "ENV":
            env.update(dict(p.split("=", 1) for p in shlex.split(rest)))
        elif word == "USER":
            user = rest.strip()
    return entry, env, user


def healthcheck() -> list[str]:
    """The Dockerfile's HEALTHCHECK command."""
    line = next(x for x in joined().splitlines() if x.startswith("HEALTHCHECK"))
    return list(json.loads(line.split(" CMD ", 1)[1]))


def test_the_image_runs_the_server_as_a_user_and_probes_liveness():
    entry, env, user = dockerfile()
    assert entry == ["llm-compiler", "serve"]
    assert user and user != "0" and user != "root"
    assert env["LLM_COMPILER_HOST"] == "0.0.0.0"
    assert "/livez" in (ROOT / "Dockerfile").read_text()
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    worker = compose["services"]["worker"]
    grace = float(worker["environment"]["LLM_COMPILER_DRAIN_GRACE"])
    assert float(worker["stop_grace_period"].rstrip("s")) > grace  # the drain fits
    replicas = worker["deploy"]["replicas"]
    max_connections = int(compose["services"]["postgres"]["command"][-1].split("=")[1])
    assert max_connections >= replicas * (CONNECTIONS_PER_WORKER + replicas - 1)


def worker_environment(folder: Path, store: str) -> tuple[list[str], dict[str, str]]:
    """compose.yaml's worker: its command and environment (with the Dockerfile's), its
    secrets made by deploy/make-secrets.sh in `folder` and mounted where compose would."""
    shutil.copytree(ROOT / "deploy", folder / "deploy")
    subprocess.run(["sh", str(folder / "deploy" / "make-secrets.sh")], check=True)
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    worker = compose["services"]["worker"]
    files = {name: folder / s["file"] for name, s in compose["secrets"].items()}
    _, env = dockerfile()[:2]
    env = {**env, **worker["environment"]}
    for name, value in list(env.items()):
        for secret in worker["secrets"]:
            value = value.replace(f"/run/secrets/{secret}", str(files[secret]))
        env[name] = value
    config = files["llmc_config"]
    # The store's host is the local cluster here (it trusts loopback: any password works).
    config.write_text(config.read_text().replace("postgres:5432/llmc", store))
    env["LLM_COMPILER_HOST"] = "127.0.0.1"  # loopback only, in a test
    del env["OTEL_EXPORTER_OTLP_ENDPOINT"]  # no Phoenix here
    return worker["command"], env


def test_the_compose_workers_run_against_a_local_postgres(cluster, tmp_path, served):
    with psycopg.connect(cluster.url(), autocommit=True) as db:
        db.execute("CREATE ROLE llmc LOGIN")
        db.execute("CREATE DATABASE llmc OWNER llmc")
    store = f"127.0.0.1:{cluster.port}/llmc"
    command, env = worker_environment(tmp_path, store)
    token = (tmp_path / "secrets" / "tokens").read_text().strip()
    password = (tmp_path / "secrets" / "pg_password").read_text().strip()
    assert f"llmc:{password}@127.0.0.1" in (tmp_path / "secrets" / "llmc.toml").read_text()
    for _ in range(2):  # two of the compose file's workers share the store
        served.append(Served(tmp_path, env, *command))
    auth = {"authorization": f"Bearer {token}"}
    check = [sys.executable, *healthcheck()[1:]]
    port = served[0].url.rsplit(":", 1)[1]
    assert subprocess.run(check, env={"LLM_COMPILER_PORT": port}, timeout=10).returncode == 0
    started = []
    for server in served:
        assert server.client.get("/readyz").status_code == 200
        body = {"start_event": {"user_msg": "Tokyo?"}}
        r = server.client.post("/workflows/compiler/run-nowait", json=body, headers=auth)
        assert r.status_code == 200, r.text
        started.append(r.json()["handler_id"])
    for handler_id in started:
        deadline = time.monotonic() + 30
        while (h := served[0].client.get(f"/handlers/{handler_id}", headers=auth).json())[
            "status"
        ] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert h["status"] == "completed"
    scrape = served[0].client.get("/metrics", headers=auth).text
    assert "llm_compiler_runs_total" in scrape and "gen_ai_client_operation_duration" in scrape
    rotated = "r0tated-" + token[:20]  # a new token in the file, the old one out; SIGHUP
    (tmp_path / "secrets" / "tokens").write_text(rotated + "\n")
    served[1].proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    new = {"authorization": f"Bearer {rotated}"}
    while served[1].client.get("/api/info", headers=new).status_code != 200:
        assert time.monotonic() < deadline, "the token file was not read again"
        time.sleep(0.1)
    assert served[1].client.get("/api/info", headers=auth).status_code == 401
    assert served[0].client.get("/api/info", headers=auth).status_code == 200  # not signalled
    for server in served:
        assert server.stop(signal.SIGTERM) == 0
        lines = [json.loads(line) for line in server.err.read_text().splitlines()]
        assert not [x for x in lines if x["level"] in ("error", "critical")], lines
        assert token not in server.output() and password not in server.output()
        assert rotated not in server.output()


def test_the_secrets_script_keeps_what_exists(tmp_path):
    shutil.copytree(ROOT / "deploy", tmp_path / "deploy")
    script = str(tmp_path / "deploy" / "make-secrets.sh")
    subprocess.run(["sh", script], check=True, capture_output=True)
    first = (tmp_path / "secrets" / "tokens").read_text()
    subprocess.run(["sh", script], check=True, capture_output=True)
    assert (tmp_path / "secrets" / "tokens").read_text() == first
    assert oct((tmp_path / "secrets").stat().st_mode)[-3:] == "700"
    assert sys.executable  # the script needs python3 on PATH, as the docs say
