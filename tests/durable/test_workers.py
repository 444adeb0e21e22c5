"""Two `llm-compiler serve` workers on one Postgres share the runs; one is killed with -9."""

from __future__ import annotations

import time

import pytest

from .conftest import Calls, Worker, journaled
from .crash_app import ANSWER
from .test_crash import answer_of

pytestmark = pytest.mark.timeout(150)


def approve(request: dict) -> dict:
    """The body approving a ``PlanApprovalRequest`` event's plan (naming its run and round)."""
    value = {
        "action": "approve",
        "run_id": request["value"]["run_id"],
        "round": request["value"]["round"],
    }
    return {"event": {"type": "PlanApprovalResponse", "value": value}}


def test_workers_share_runs_and_finish_those_of_a_killed_worker(database, calls: Calls, workers):
    w1 = Worker(database, calls, "--max-runs", "2", crash_at="tool")
    workers.append(w1)
    a = w1.start_run()  # held at its slow tool
    c = w1.start_run(mode="approve")  # waits for a human
    calls.wait_for("blocked", "tool")
    c_request = w1.events(c, stop_at="PlanApprovalRequest")[-1]
    assert c_request["type"] == "PlanApprovalRequest"

    w2 = Worker(database, calls, "--max-runs", "1")
    workers.append(w2)
    b = w1.start_run()  # w1 holds two runs: b waits in Postgres, w2 takes it
    assert answer_of(w1.wait_done(b)) == ANSWER

    d = w2.start_run(mode="approve")
    w2.events(d, stop_at="PlanApprovalRequest")
    assert w1.client.post(f"/handlers/{d}/cancel", json={}).status_code == 200  # through the other
    assert w2.wait_done(d)["status"] == "cancelled"

    assert w2.client.post(f"/events/{c}", json=approve(c_request)).status_code == 200  # on w1
    calls.wait_for("blocked", "tool", n=2)
    w2.events(
        c,
        until=lambda evs: (
            {1, 2} <= {e["value"].get("task_id") for e in evs if e["type"] == "TaskResult"}
        ),
    )
    run_ids = {run: w1.run_id(run) for run in (a, c)}
    w1.kill()
    recorded = {run: journaled(database, run_id) for run, run_id in run_ids.items()}

    for run in (a, c):
        assert answer_of(w2.wait_done(run)) == ANSWER
    runs = {r["handler_id"]: r for r in w2.client.get("/api/runs").json()["runs"]}
    assert {runs[h]["worker"] for h in (a, b, c)} == {w2.worker}
    assert runs[d]["status"] == "cancelled"
    # Journaled calls never ran twice: per run, only calls in flight at the kill did. (c's
    # lookups had just returned, their results on the stream, when w1 was killed; the stream
    # gets a result before the journal gets its step's outcome.)
    assert calls.count("llm", "planner") == 4 and calls.count("llm", "joiner") == 3
    unrecorded = sum(("tool", "fetch:alpha") not in recorded[run] for run in (a, c))
    assert 3 <= calls.count("tool", "fetch:alpha") <= 3 + unrecorded
    assert calls.count("tool", "combine") == 3
    assert calls.count("tool", "slow:gamma") == 5  # b once, a and c twice (in flight)
    history = [e["type"] for e in w2.events(a)]
    assert history.count("RunResumed") == 1 and history[-1] == "StopEvent"
    assert history.index("RunResumed") > history.index("PlanEvent")


def test_a_worker_stopped_mid_run_leaves_it_to_the_next_worker(database, calls: Calls, workers):
    first = Worker(database, calls, crash_at="tool")
    workers.append(first)
    run = first.start_run()
    calls.wait_for("blocked", "tool")
    first.stop()  # Ctrl-C, with the run's slow tool in flight

    again = Worker(database, calls)
    workers.append(again)
    assert answer_of(again.wait_done(run)) == ANSWER
    assert calls.count("tool", "fetch:alpha") == 1 and calls.count("llm", "planner") == 1


def test_a_run_waiting_for_approval_leaves_memory_and_comes_back(database, calls, workers):
    import psycopg

    worker = Worker(database, calls, "--idle-release", "0.5")
    workers.append(worker)
    handler_id = worker.start_run(mode="approve")
    request = worker.events(handler_id, stop_at="PlanApprovalRequest")[-1]
    run_id = worker.client.get(f"/handlers/{handler_id}").json()["run_id"]
    query = "SELECT owner, idle_since FROM llmc_runs WHERE run_id = %s"
    deadline = time.monotonic() + 30
    with psycopg.connect(database) as db:
        # Released: no worker holds it, and it is marked idle (nothing of it runs anywhere)...
        while db.execute(query, (run_id,)).fetchone() != (None, pytest.approx(time.time(), abs=60)):
            assert time.monotonic() < deadline, "the waiting run was never released"
            time.sleep(0.1)
    # ...while the run itself still waits, and the verdict loads it again.
    assert worker.client.get(f"/handlers/{handler_id}").json()["status"] == "running"
    assert worker.client.post(f"/events/{handler_id}", json=approve(request)).status_code == 200
    assert answer_of(worker.wait_done(handler_id)) == ANSWER
    assert calls.count("llm", "planner") == 1
