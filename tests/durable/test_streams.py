"""Streams and run ids of served runs, on every store, with real `llm-compiler serve` processes.

Many runs at once: every stream holds each event once, numbered 0, 1, 2... with no gap
(concurrent appends of one run never collide), read live or from the journal, through the
worker running it or another. A start naming an existing handler id gets that run, never a
second one (a finished run's record is never replaced), also when the starts come at once,
through one worker or two; an id that is not one is a 400.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from .conftest import Calls, Worker
from .crash_app import ANSWER
from .test_crash import answer_of

pytestmark = pytest.mark.timeout(180)
RUNS = 12


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "memory":
        return "memory"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("database"))


def check_stream(events: list[dict]) -> None:
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "StopEvent", kinds
    results = [e["value"]["task_id"] for e in events if e["type"] == "TaskResult"]
    assert sorted(results) == [1, 2, 3, 4], kinds  # each task's result once
    assert kinds.count("PlanEvent") >= 2 and kinds.count("JoinEvent") == 1


def test_concurrent_runs_lose_and_repeat_no_event(store, calls: Calls, workers):
    worker = Worker(store, calls, "--max-runs", "4")
    workers.append(worker)
    with ThreadPoolExecutor(RUNS) as pool:
        handlers = list(pool.map(lambda _: worker.start_run(), range(RUNS)))
        done = list(pool.map(worker.wait_done, handlers))
    assert all(answer_of(h) == ANSWER for h in done)
    readers = [worker]
    if store.startswith("postgresql"):
        other = Worker(store, calls)  # reads the journal, runs nothing of these
        workers.append(other)
        readers.append(other)
    for reader in readers:
        for handler_id in handlers:
            events = reader.events(handler_id)
            check_stream(events)
            with reader.client.stream(
                "GET", f"/events/{handler_id}", params={"sse": "false", "after_sequence": -1}
            ) as r:
                assert r.status_code == 200
    assert calls.count("llm", "planner") == RUNS and calls.count("tool", "combine") == RUNS


def test_sequences_have_no_gap_or_repeat(store, calls: Calls, workers):
    import json

    worker = Worker(store, calls)
    workers.append(worker)
    with ThreadPoolExecutor(RUNS) as pool:
        handlers = list(pool.map(lambda _: worker.start_run(), range(RUNS)))
        list(pool.map(worker.wait_done, handlers))
    for handler_id in handlers:
        seqs = []
        params = {"after_sequence": -1, "include_internal": "true"}
        with worker.client.stream("GET", f"/events/{handler_id}", params=params) as r:
            for line in r.iter_lines():
                if line.startswith("id:"):
                    seqs.append(int(line.split(":", 1)[1]))
                elif line.startswith("data:") and json.loads(line[5:])["type"] == "StopEvent":
                    break
        assert seqs == list(range(len(seqs))), seqs


def test_a_handler_id_names_one_run(store, calls: Calls, workers):
    worker = Worker(store, calls)
    workers.append(worker)
    body = {"handler_id": "order-42", "start_event": {"user_msg": "alpha, beta and gamma?"}}
    first = worker.client.post("/workflows/compiler/run-nowait", json=body)
    assert first.status_code == 200, first.text
    assert answer_of(worker.wait_done("order-42")) == ANSWER
    for path in ("/workflows/compiler/run-nowait", "/workflows/compiler/run"):
        again = worker.client.post(path, json={**body, "start_event": {"user_msg": "other?"}})
        assert again.status_code == 200, again.text  # that run, not a second one
        assert again.json()["run_id"] == first.json()["run_id"]
    assert answer_of(again.json()) == ANSWER  # /run: its answer
    runs = [
        r for r in worker.client.get("/api/runs").json()["runs"] if r["handler_id"] == "order-42"
    ]
    assert len(runs) == 1 and runs[0]["question"] == "alpha, beta and gamma?"
    assert calls.count("llm", "planner") == 1
    for bad in ("../../etc", "a/b", ".hidden", "", "x" * 200, 7):
        r = worker.client.post("/workflows/compiler/run-nowait", json={**body, "handler_id": bad})
        assert r.status_code == 400, (bad, r.text)
        assert "Invalid handler_id" in r.json()["detail"]


def test_one_handler_id_started_at_once_runs_once(store, calls: Calls, workers):
    """Starts naming one new handler id at once, through one worker (every store) and,
    on Postgres, through two: one run, its planner once; every caller gets that run."""
    pair = [Worker(store, calls)]
    if store.startswith("postgres"):
        pair.append(Worker(store, calls))
    workers.extend(pair)
    body = {"handler_id": "order-7", "start_event": {"user_msg": "alpha, beta and gamma?"}}
    paths = ["/workflows/compiler/run-nowait", "/workflows/compiler/run"] * 3
    with ThreadPoolExecutor(len(paths)) as pool:
        answers = list(
            pool.map(lambda i: pair[i % len(pair)].client.post(paths[i], json=body), range(6))
        )
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert len({a.json()["run_id"] for a in answers}) == 1
    assert answer_of(pair[0].wait_done("order-7")) == ANSWER
    assert calls.count("llm", "planner") == 1 and calls.count("tool", "combine") == 1
