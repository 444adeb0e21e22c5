"""No secret on a command line or in a log line: a served run's whole output (stdout,
stderr, logs at debug, the access log) holds neither the token nor the database password."""

from __future__ import annotations

import json
import time

import pytest

from .conftest import PASSWORD, TOKEN, Served, with_password

pytestmark = pytest.mark.timeout(120)
APP = "examples.served_scripted:make"


def wait_done(server: Served, handler_id: str, headers: dict[str, str]) -> dict:
    deadline = time.monotonic() + 30
    while True:
        handler = server.client.get(f"/handlers/{handler_id}", headers=headers).json()
        if handler["status"] != "running":
            return handler
        assert time.monotonic() < deadline, handler
        time.sleep(0.1)


def test_a_served_run_logs_neither_token_nor_password(cluster, tmp_path, served):
    env = {
        "LLM_COMPILER_STORE": with_password(cluster.new_database()),
        "LLM_COMPILER_TOKEN": TOKEN,
        "LLM_COMPILER_LOG_LEVEL": "debug",
        "LLM_COMPILER_LOG_FORMAT": "json",
        "LLM_COMPILER_ACCESS_LOG": "true",
        "LLM_COMPILER_WORKFLOW": APP,
        "SCRIPTED_TOOL_SECONDS": "0",
    }
    server = Served(tmp_path, env)
    served.append(server)
    with open(f"/proc/{server.proc.pid}/cmdline", "rb") as f:
        command_line = f.read().decode()
    assert TOKEN not in command_line and PASSWORD not in command_line
    good = {"authorization": f"Bearer {TOKEN}"}
    body = {"start_event": {"user_msg": "How warm is it in Lima?"}}
    r = server.client.post("/workflows/compiler/run-nowait", json=body, headers=good)
    assert r.status_code == 200, r.text
    handler = wait_done(server, r.json()["handler_id"], good)
    assert handler["status"] == "completed" and "Lima 19.0 C" in json.dumps(handler["result"])
    bad = {"authorization": f"Bearer {TOKEN[:-1]}!"}
    assert server.client.get("/api/runs", headers=bad).status_code == 401
    assert server.stop() == 0
    out, err = server.out.read_text(), server.err.read_text()
    assert TOKEN not in out + err and TOKEN[:-1] not in out + err
    assert PASSWORD not in out + err
    assert "#token=<token>" in out  # where the token goes, not the token
    lines = [json.loads(line) for line in err.splitlines()]  # every log line is JSON
    said = [json.loads(line) for line in out.splitlines()]  # and every line on stdout
    assert any("#token=<token>" in x["message"] for x in said)
    access = [x for x in lines if x["logger"] == "llm_compiler.access"]
    started = [x for x in access if x["path"] == "/workflows/compiler/run-nowait"]
    assert [(x["method"], x["status"]) for x in started] == [("POST", 200)]
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    assert not [x for x in lines if "exc" in x or x["level"] in ("error", "critical")]
