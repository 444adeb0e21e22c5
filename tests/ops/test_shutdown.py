"""A stop with runs in flight and runs queued logs no traceback: a stopping worker claims
no runs (its journal is closing), so no 'Claiming runs failed' with an AssertionError."""

from __future__ import annotations

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
