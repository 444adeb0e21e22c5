"""A rolling restart under load: three ``llm-compiler serve`` workers on one Postgres are
stopped one by one with SIGTERM (each drains, then hands its runs over) and replaced,
while clients keep starting runs whose tools are all ``at_most_once``. No run is lost and
no call comes back "outcome unknown": the calls in flight finished within the grace, and
the calls not started yet started on the worker that took the run."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from llm_compiler.engine.policy import UNKNOWN_AFTER_CRASH

from .conftest import Calls, Worker
from .crash_app import ANSWER

pytestmark = pytest.mark.timeout(240)
ALL_AT_MOST_ONCE = "fetch,slow,combine"


def start_worker(database: str, calls: Calls, grace: str) -> Worker:
    return Worker(
        database,
        calls,
        "--max-runs",
        "4",
        "--drain-grace",
        grace,
        slow=1.0,
        undeclared=ALL_AT_MOST_ONCE,
    )


class Load:
    """Starts a run every `every` seconds through a live worker, in a thread."""

    def __init__(self, live: list[Worker], every: float = 0.25) -> None:
        self.live, self.every = live, every
        self.started: list[str] = []
        self.errors: list[str] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        turn = 0
        while not self.done.wait(self.every):
            live = list(self.live)
            if not live:
                continue
            worker = live[turn % len(live)]
            turn += 1
            try:
                self.started.append(worker.start_run())
            except Exception as e:  # a refused start is a lost run: reported by the test
                self.errors.append(repr(e))

    def stop(self) -> None:
        self.done.set()
        self.thread.join(10)


def test_a_rolling_restart_loses_no_run_and_cuts_no_call(database, calls: Calls, workers):
    live = [start_worker(database, calls, "20") for _ in range(3)]
    workers += live
    load = Load(live)
    try:
        for i in range(3):
            time.sleep(1.5)  # runs in flight everywhere, some waiting in the queue
            old = live.pop(i if i < len(live) else 0)  # out of the balancer first
            old.proc.send_signal(signal.SIGTERM)
            assert old.proc.wait(60) == 0
            logged = old.proc.stderr.read()  # type: ignore[union-attr]
            assert "Drained; handing the runs over." in logged, logged
            assert "Traceback" not in logged and "Claiming runs failed" not in logged, logged
            new = start_worker(database, calls, "20")
            workers.append(new)
            live.insert(i, new)
    finally:
        load.stop()
    assert not load.errors, load.errors
    assert len(load.started) >= 15
    reader = live[0]
    unknown = UNKNOWN_AFTER_CRASH.split("{")[0][:30]
    for handler_id in load.started:
        handler = reader.wait_done(handler_id, timeout=90)
        assert handler["status"] == "completed", handler
        summary = handler["result"]["value"]["result"]["summary"]
        assert summary["answer"] == ANSWER
        cut = [t for t in summary["tasks"] if t["status"] != "done" or unknown in str(t["output"])]
        assert not cut, (handler_id, cut)
    for _, _, what in calls.lines():
        assert what != "blocked"
