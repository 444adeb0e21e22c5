"""kill -9 of a real `llm-compiler serve` at each point of a run, then the same command again.

The run must finish with the same answer; nothing that completed runs again; the call in
flight at the kill runs at most once more; the stream holds the whole history with one
``RunResumed`` mark.
"""

from __future__ import annotations

import pytest

from .conftest import Calls, Worker
from .crash_app import ANSWER

pytestmark = pytest.mark.timeout(120)

#: (point, the call in flight there, which may run once more)
POINTS = [
    ("plan", ("llm", "planner")),
    ("schedule", None),
    ("tool", ("tool", "slow:gamma")),
    ("joiner", ("llm", "joiner")),
]
EVERY_CALL = [
    ("llm", "planner"),
    ("tool", "fetch:alpha"),
    ("tool", "fetch:beta"),
    ("tool", "slow:gamma"),
    ("tool", "combine"),
    ("llm", "joiner"),
]


def answer_of(handler: dict) -> str:
    return handler["result"]["value"]["result"]["response"]["blocks"][0]["text"]


@pytest.mark.parametrize("point,in_flight", POINTS, ids=[p for p, _ in POINTS])
def test_a_run_killed_at_any_point_finishes_once_restarted(
    point, in_flight, database, calls: Calls, workers
):
    first = Worker(database, calls, crash_at=point)
    workers.append(first)
    handler_id = first.start_run()
    calls.wait_for("blocked", point)
    first.kill()

    again = Worker(database, calls)
    workers.append(again)
    handler = again.wait_done(handler_id)

    assert handler["status"] == "completed", handler
    assert answer_of(handler) == ANSWER
    for call in EVERY_CALL:
        allowed = 2 if call == in_flight else 1
        assert 1 <= calls.count(*call) <= allowed, (call, calls.lines())
    events = again.events(handler_id)
    marks = [e for e in events if e["type"] == "RunResumed"]
    assert len(marks) == 1 and marks[0]["value"]["worker"] == again.worker
    assert events[-1]["type"] == "StopEvent"
