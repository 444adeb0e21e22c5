"""Workers ride out their database: a Postgres restart or an outage of seconds does not stop
them; runs pause and go on, nothing completed runs again, /health says degraded meanwhile.
An outage longer than ``--outage-limit`` stops a worker (exit status 75), and the next
worker resumes its runs."""

from __future__ import annotations

import time

import pytest

from .conftest import Calls, Worker, journaled
from .crash_app import ANSWER
from .test_crash import answer_of

pytestmark = pytest.mark.timeout(180)
EVERY_CALL = [
    ("llm", "planner"),
    ("tool", "fetch:alpha"),
    ("tool", "fetch:beta"),
    ("tool", "slow:gamma"),
    ("tool", "combine"),
    ("llm", "joiner"),
]


def health(worker: Worker) -> str:
    return str(worker.client.get("/health").json()["status"])


def test_a_postgres_restart_stops_no_worker(cluster, database, calls: Calls, workers):
    busy = Worker(database, calls, slow=3)
    idle = Worker(database, calls)
    workers += [busy, idle]
    run = busy.start_run()
    calls.wait_for("tool", "slow:gamma")  # the slow tool is in flight
    cluster.restart()
    assert answer_of(busy.wait_done(run)) == ANSWER
    assert busy.proc.poll() is None and idle.proc.poll() is None
    assert health(busy) == health(idle) == "healthy"
    for call in EVERY_CALL:
        assert calls.count(*call) == 1, (call, calls.lines())
    again = idle.start_run()  # both still serve
    assert answer_of(idle.wait_done(again)) == ANSWER


def test_an_outage_of_seconds_pauses_runs_and_reports_degraded(cluster, database, calls, workers):
    worker = Worker(database, calls, slow=2)
    workers.append(worker)
    run = worker.start_run()
    calls.wait_for("tool", "slow:gamma")
    cluster.stop()
    try:
        deadline = time.monotonic() + 30
        while health(worker) != "degraded":  # noticed at the latest when the tool returns
            assert time.monotonic() < deadline, "the worker never reported its store down"
            time.sleep(0.2)
        time.sleep(5)  # the tool finished long ago; its result waits for the database
        assert worker.proc.poll() is None
        # The joiner may have answered; the answer is not given before its commit.
        answer = worker.client.get(f"/handlers/{run}")
        assert answer.status_code == 503 or answer.json()["status"] == "running", answer.text
    finally:
        cluster.start()
    assert answer_of(worker.wait_done(run)) == ANSWER
    deadline = time.monotonic() + 10  # its lock connection reconnects with backoff
    while health(worker) != "healthy":
        assert time.monotonic() < deadline, "the worker still reports its store down"
        time.sleep(0.2)
    for call in EVERY_CALL:
        assert calls.count(*call) == 1, (call, calls.lines())


def test_an_outage_past_the_limit_stops_the_worker(cluster, database, calls, workers):
    worker = Worker(database, calls, "--outage-limit", "2", slow=5)
    workers.append(worker)
    run = worker.start_run()
    run_id = worker.run_id(run)
    calls.wait_for("tool", "slow:gamma")
    # The plan's commit is started, not waited for, before its tasks: on a loaded machine
    # it may land after the slow call starts.
    deadline = time.monotonic() + 30
    while ("llm", "planner") not in journaled(database, run_id):
        assert time.monotonic() < deadline, "the plan was never committed"
        time.sleep(0.1)
    cluster.stop()
    try:
        assert worker.proc.wait(30) == 75
        assert "did not answer for 2 s" in worker.proc.stderr.read()  # type: ignore[union-attr]
    finally:
        cluster.start()
    recorded = journaled(database, run_id)  # what the stopped worker had committed
    again = Worker(database, calls)
    workers.append(again)
    assert answer_of(again.wait_done(run)) == ANSWER
    for call in EVERY_CALL:  # recorded calls ran once; those in flight at most once more
        assert 1 <= calls.count(*call) <= (1 if call in recorded else 2), (call, recorded)
    assert ("llm", "planner") in recorded
