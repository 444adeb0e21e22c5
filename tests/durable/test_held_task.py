"""A served durable run with a task held for approval (``serve --tool-policies``): the
other tasks run, the idle run leaves memory, and the verdict loads it again; the held
task runs once."""

from __future__ import annotations

import time

import pytest

from .conftest import Calls, Worker
from .crash_app import ANSWER
from .test_crash import answer_of

pytestmark = pytest.mark.timeout(150)


def test_a_held_task_leaves_memory_and_comes_back(database, calls: Calls, workers, tmp_path):
    import psycopg

    policies = tmp_path / "policies.json"
    policies.write_text('{"combine": {"requires_approval": true}}')
    worker = Worker(database, calls, "--idle-release", "0.5", "--tool-policies", str(policies))
    workers.append(worker)
    handler_id = worker.start_run()
    events = worker.events(handler_id, stop_at="AwaitingApproval")
    (request,) = [e["value"] for e in events if e["type"] == "TaskApprovalRequest"]
    assert request["task_id"] == 4 and request["policy"]["requires_approval"]
    for what in ("fetch:alpha", "fetch:beta", "slow:gamma"):
        assert calls.count("tool", what) == 1  # the rest of the plan ran meanwhile
    assert calls.count("tool", "combine") == 0
    run_id = worker.run_id(handler_id)
    query = "SELECT owner, idle_since FROM llmc_runs WHERE run_id = %s"
    deadline = time.monotonic() + 30
    with psycopg.connect(database) as db:  # released: no worker holds it
        while db.execute(query, (run_id,)).fetchone() != (None, pytest.approx(time.time(), abs=60)):
            assert time.monotonic() < deadline, "the waiting run was never released"
            time.sleep(0.1)
    value = {key: request[key] for key in ("run_id", "round", "task_id")}
    verdict = {"event": {"type": "TaskApprovalResponse", "value": {**value, "action": "approve"}}}
    assert worker.client.post(f"/events/{handler_id}", json=verdict).status_code == 200
    assert answer_of(worker.wait_done(handler_id)) == ANSWER
    assert calls.count("tool", "combine") == 1
    for what in ("fetch:alpha", "fetch:beta", "slow:gamma"):
        assert calls.count("tool", what) == 1  # nothing ran twice


def test_a_held_task_survives_kill_9_and_runs_once_on_the_next_worker(
    database, calls: Calls, workers, tmp_path
):
    """The verdict reaches the run on another worker after a kill -9; the held call runs
    once (the recovered run's TaskReady for it and the scheduler's start one call). Tasks
    whose results had not reached the journal at the kill may run again: that is the
    durable layer's rule for calls in flight, not this test's subject."""
    policies = tmp_path / "policies.json"
    policies.write_text('{"combine": {"requires_approval": true}}')
    first = Worker(database, calls, "--tool-policies", str(policies))
    workers.append(first)
    handler_id = first.start_run()
    events = first.events(handler_id, stop_at="AwaitingApproval")
    (request,) = [e["value"] for e in events if e["type"] == "TaskApprovalRequest"]
    first.kill()
    assert calls.count("tool", "combine") == 0
    second = Worker(database, calls, "--tool-policies", str(policies))
    workers.append(second)
    value = {key: request[key] for key in ("run_id", "round", "task_id")}
    verdict = {"event": {"type": "TaskApprovalResponse", "value": {**value, "action": "approve"}}}
    r = second.client.post(f"/events/{handler_id}", json=verdict)
    assert r.status_code == 200, r.text
    assert answer_of(second.wait_done(handler_id)) == ANSWER
    assert calls.count("tool", "combine") == 1
