"""A stop with runs in flight and runs queued logs no traceback: a stopping worker claims
no runs (its journal is closing), so no 'Claiming runs failed' with an AssertionError."""

from __future__ import annotations

import time

import pytest

from .conftest import Served

pytestmark = pytest.mark.timeout(90)


def test_stopping_with_runs_held_and_queued_logs_no_traceback(cluster, tmp_path, served):
    env = {
        "LLM_COMPILER_STORE": cluster.new_database(),
        "LLM_COMPILER_WORKFLOW": "examples.served_scripted:make",
        "SCRIPTED_TOOL_SECONDS": "3",
    }
    server = Served(tmp_path, env, "--max-runs", "2", "--drain-grace", "0")
    served.append(server)
    body = {"start_event": {"user_msg": "Oslo?"}}
    for _ in range(4):  # two held, two queued
        r = server.client.post("/workflows/compiler/run-nowait", json=body)
        assert r.status_code == 200, r.text
    assert server.stop() == 0
    logged = server.err.read_text()
    assert "Traceback" not in logged and "Claiming runs failed" not in logged, logged


def test_a_postgres_restart_logs_warnings_not_tracebacks(cluster, tmp_path, served):
    env = {
        "LLM_COMPILER_STORE": cluster.new_database(),
        "LLM_COMPILER_WORKFLOW": "examples.served_scripted:make",
        "SCRIPTED_TOOL_SECONDS": "1",
    }
    served += [Served(tmp_path, env), Served(tmp_path, env)]
    body = {"start_event": {"user_msg": "Oslo?"}}
    assert served[0].client.post("/workflows/compiler/run", json=body).status_code == 200
    r = served[0].client.post("/workflows/compiler/run-nowait", json=body)
    cluster.restart()
    deadline = time.monotonic() + 30
    while True:  # a 503 while the database restarts, then the run goes on
        handler = served[0].client.get(f"/handlers/{r.json()['handler_id']}")
        if handler.status_code == 200 and handler.json()["status"] == "completed":
            break
        assert time.monotonic() < deadline, handler.text
        time.sleep(0.2)
    for server in served:
        assert server.stop() == 0
        logged = server.err.read_text()
        assert "Traceback" not in logged and "ERROR" not in logged, logged
        assert "The store answers again" in logged or "holds its lock again" in logged
