"""The container's recipe, followed without a container: the Dockerfile's entrypoint and
environment and compose.yaml's worker command, environment and secrets (made by
deploy/make-secrets.sh) start two workers on a local Postgres; they are ready, serve
runs with the token from the token file, export metrics, and stop cleanly on SIGTERM."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
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
    shown = f"postgresql://llmc:***@{store}"  # the configuration file's store, masked
    for server in served:
        ready = server.client.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"status": "ok", "store": shown}
        assert f"Runs are kept in {shown}, from the configuration file " in server.output()
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


def test_compose_restarts_its_services_and_has_a_port_for_each_scaled_worker():
    """A worker that stops after a long outage (status 75) comes back; ``--scale
    worker=5`` (the deployment page's example) finds a host port for each worker."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    for name, service in compose["services"].items():
        assert service.get("restart") == "unless-stopped", name
    worker = compose["services"]["worker"]
    (ports,) = worker["ports"]
    first, last = ports.split(":")[-2].split("-")
    assert int(last) - int(first) + 1 >= max(5, worker["deploy"]["replicas"]), ports
    assert "--scale worker=5" in (ROOT / "docs" / "deployment.md").read_text()


def test_the_docker_context_leaves_out_the_secrets_and_keeps_what_the_image_copies():
    ignored = [
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for private in ("secrets", ".git", ".venv"):
        assert private in ignored, private
    copied = [
        word
        for line in joined().splitlines()
        if line.startswith("COPY ") and "--from=" not in line
        for word in line.split()[1:-1]
    ]
    assert {"src", "examples", "pyproject.toml"} <= set(copied), copied
    for path in copied:
        assert not any(fnmatch.fnmatch(path, pattern) for pattern in ignored), path
    _, env, _ = dockerfile()
    assert "PYTHONPATH" not in env  # --workflow imports from the working directory


def unit_in_the_docs() -> str:
    """The systemd unit the deployment page shows."""
    page = (ROOT / "docs" / "deployment.md").read_text()
    return page.split("```ini\n", 1)[1].split("```", 1)[0]


def test_the_systemd_unit_has_no_comment_after_a_setting():
    """systemd reads ``#`` as a comment only at the start of a line: after a setting it
    is part of the value (``kill -HUP $MAINPID # ...`` gets the comment's words)."""
    unit = (ROOT / "deploy" / "llm-compiler.service").read_text()
    assert unit_in_the_docs() == unit
    for line in unit.splitlines():
        if "=" in line and not line.lstrip().startswith(("#", ";")):
            assert "#" not in line and " ;" not in line, line


def test_the_systemd_unit_verifies(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (make test installs Debian's systemd)")
    # Its ExecStart is where the docs install the venv; here, a program that exists.
    unit = (ROOT / "deploy" / "llm-compiler.service").read_text()
    assert "ExecStart=/opt/llmc/bin/llm-compiler serve\n" in unit
    (tmp_path / "llm-compiler.service").write_text(
        unit.replace("/opt/llmc/bin/llm-compiler", shutil.which("true") or "/bin/true")
    )
    done = subprocess.run(
        [analyze, "verify", str(tmp_path / "llm-compiler.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and not done.stderr.strip(), done.stderr


def test_a_workflow_module_imports_from_the_working_directory(tmp_path):
    """As the console script runs it (``python -P``: the working directory is not on the
    path, nor is it on PYTHONPATH), the docs' own ``examples.served_scripted:make``
    serves from the repository's root; the store in use is logged."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for name in ("LLM_COMPILER_STORE", "LLM_COMPILER_CONFIG"):
        env.pop(name, None)
    cmd = [sys.executable, "-P", "-m", "llm_compiler.cli", "serve", "--port", "0"]
    cmd += ["--workflow", "examples.served_scripted:make"]
    err = tmp_path / "err"
    with err.open("w") as log:
        proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True
        )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "Serving the live plan page at " in line, (line, err.read_text())
        url = line.split(" at ")[1].split()[0]
        ready = httpx.get(url + "readyz", timeout=10)
        assert ready.json() == {"status": "ok", "store": "memory"}
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        proc.stdout.close()  # type: ignore[union-attr]
    assert "Runs are kept in memory (the default)" in err.read_text()
