"""kill -9 a durable run (a real subprocess) at each point; run it again.

Two runtimes, both on SQLite: the fact journal (``durable_runtime``: the run's facts are
kept, the run rebuilt from them), and llama-agents-server's workflow store (it resumes a
run from its tick journal at start).

The tools and LLM calls append to a log file, so the test counts what ran across both
processes: a finished tool, planner or joiner call never runs again, the call in flight
at the kill runs at most once more, and the answer is the one of an uncrashed run.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("asyncpg")

APP = Path(__file__).with_name("kill_app.py")
pytestmark = pytest.mark.timeout(240)


BACKENDS = ["journal", "server"]


def start(directory: Path, crash: str, backend: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(APP), str(directory), crash, backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(directory: Path, backend: str) -> dict[str, object]:
    """Run the app again without a crash; its answer and task outputs."""
    proc = start(directory, "none", backend)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def calls(directory: Path) -> list[str]:
    return (directory / "calls.log").read_text().splitlines()


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, backend: str) -> dict[str, object]:
    directory = tmp_path_factory.mktemp("reference")
    answer = finish(directory, backend)
    assert answer["answer"] == "A and B combined"
    assert calls(directory).count("llm planner") == 1
    assert calls(directory).count("retrieve") == 1  # not once per step (state is in SQLite)
    return answer


LOOKUPS = {1: "a", 2: "b", 4: "B"}


def committed_results(directory: Path) -> set[int]:
    """The tasks whose result is in the journal (read right after the kill)."""
    import sqlite3

    with sqlite3.connect(directory / "runs.sqlite") as db:
        rows = db.execute(
            "SELECT key FROM llmc_facts WHERE run_id = 'durable-run-1' AND kind = 'result'"
        ).fetchall()
    return {int(key.split(":")[1]) for (key,) in rows}


def unrecorded_lookups(directory: Path, backend: str) -> int:
    """Lookups whose result was not in the journal at the kill (read right after it): only
    those may run again. (The llama-agents-server store has no such journal: one allowed.)"""
    if backend != "journal":
        return 1
    done = committed_results(directory)
    return sum(1 for task in LOOKUPS if task not in done)


def assert_nothing_finished_ran_again(
    log: list[str], unrecorded: int = 0, slow_again: bool = False
) -> None:
    """Every lookup ran to the end; none ran again, but for at most `unrecorded` calls that
    the kill cut (task 4's lookup runs beside the slow tool) or that had returned without
    their step's outcome journaled yet (at-least-once); the slow tool likewise, if
    `slow_again`."""
    again = 0
    for x in ("a", "b", "B"):
        starts, dones = log.count(f"start lookup {x}"), log.count(f"done lookup {x}")
        assert 1 <= dones <= starts <= dones + 1, log  # at most one attempt cut by the kill
        again += starts - 1
    assert again <= unrecorded, log
    assert 1 <= log.count("done slow A") <= (2 if slow_again else 1), log
    assert log.count("start slow A") <= 2, log


@pytest.mark.parametrize(
    ("crash", "planner_calls", "joiner_calls"),
    [
        ("plan", 2, 1),  # the planner call in flight runs once more
        ("schedule", 1, 1),
        ("join", 1, 2),  # the joiner call in flight runs once more
    ],
)
def test_a_run_killed_inside_a_step_finishes_with_the_same_answer(
    tmp_path: Path,
    backend: str,
    reference: dict[str, object],
    crash: str,
    planner_calls: int,
    joiner_calls: int,
) -> None:
    first = start(tmp_path, crash, backend)
    first.communicate(timeout=120)
    assert first.returncode == -signal.SIGKILL
    # Killed inside `schedule` or the joiner (which starts without waiting for their
    # commit): the results of `pure` lookups may not be committed yet (the journal, read
    # now, says which); killed mid-plan, every lookup's result is.
    unrecorded = unrecorded_lookups(tmp_path, backend) if crash in ("schedule", "join") else 0
    slow_again = crash == "join" and backend == "journal" and 3 not in committed_results(tmp_path)
    assert finish(tmp_path, backend) == reference
    log = calls(tmp_path)
    assert_nothing_finished_ran_again(log, unrecorded=unrecorded, slow_again=slow_again)
    assert log.count("llm planner") == planner_calls, log
    assert log.count("llm joiner") == joiner_calls, log
    assert log.count("retrieve") <= 2, log  # once per process at most
    if crash == "plan":  # tasks 1 and 2 had finished before the kill: kept, not re-run
        second_plan = [i for i, line in enumerate(log) if line == "llm planner"][1]
        assert log.index("done lookup a") < second_plan and log.index("done lookup b") < second_plan


def test_a_run_killed_with_a_tool_in_flight_runs_only_that_call_again(
    tmp_path: Path, backend: str, reference: dict[str, object]
) -> None:
    first = start(tmp_path, "tool", backend)
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():  # the slow tool signals, then blocks
        assert first.poll() is None and time.monotonic() < deadline, first.stderr
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    unrecorded = unrecorded_lookups(tmp_path, backend)
    before = calls(tmp_path)
    assert "start slow A" in before and "done slow A" not in before
    assert finish(tmp_path, backend) == reference
    log = calls(tmp_path)
    # Pure calls wait for no commit: a lookup whose result the journal did not hold at the
    # kill (read now) may run again, besides one returning at the kill.
    assert_nothing_finished_ran_again(log, unrecorded=max(1, unrecorded))
    assert log.count("start slow A") == 2  # pure: the call in flight ran again
    assert log.count("llm planner") == 1 and log.count("llm joiner") == 1


def test_an_at_most_once_call_cut_by_a_kill_is_not_run_again(tmp_path: Path) -> None:
    """The slow tool marks itself at-most-once (``durable.at_most_once()``) before its effect;
    killed there, the resumed run does not call it again: the task's outcome says the
    outcome is unknown, and the run goes on without it."""
    import asyncio

    from llm_compiler.durable import durable_runtime

    first = start(tmp_path, "once", "journal")
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.stderr
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)

    async def cut() -> list[tuple[int, int]]:
        runtime = durable_runtime(f"sqlite:///{tmp_path / 'runs.sqlite'}")
        await runtime.journal.open()
        try:
            return await runtime.journal.started_without_result("durable-run-1")
        finally:
            await runtime.journal.close()
            assert runtime.durable is not None
            await runtime.durable.liveness.stop()

    assert asyncio.run(cut()) == [(0, 3)]
    out = finish(tmp_path, "journal")
    assert out["answer"] == "A and B combined"
    outputs = out["outputs"]
    assert {k: outputs[k] for k in ("1", "2", "4")} == {"1": "A", "2": "B", "4": "B"}
    assert "outcome of slow is unknown" in str(outputs["3"])  # the workflow's words
    log = calls(tmp_path)
    assert log.count("start slow A") == 1, log  # not run again
    assert log.count("llm planner") == 1 and log.count("llm joiner") == 1


@pytest.mark.parametrize("declared", ["policy", "default"])
def test_an_at_most_once_tool_is_not_run_again_after_a_kill(tmp_path: Path, declared: str) -> None:
    """A tool declared ``at_most_once``, or declaring nothing (the default class), killed in
    flight: the runtime committed the call's start before it (no wiring by the user), and
    the workflow's ``after_crash`` gives the outcome-unknown observation on resume."""
    first = start(tmp_path, declared, "journal")
    deadline = time.monotonic() + 120
    while not (tmp_path / "ready").exists():
        assert first.poll() is None and time.monotonic() < deadline, first.stderr
        time.sleep(0.05)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    out = finish(tmp_path, "journal")
    assert out["answer"] == "A and B combined"
    assert out["outputs"]["3"] != "<A>" and "unknown" in str(out["outputs"]["3"]).lower()
    assert {k: out["outputs"][k] for k in ("1", "2", "4")} == {"1": "A", "2": "B", "4": "B"}
    log = calls(tmp_path)
    assert log.count("start slow A") == 1, log  # not run again
