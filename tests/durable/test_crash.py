"""kill -9 of a real `llm-compiler serve` at each point of a run, then the same command again.

The run must finish with the same answer; nothing that completed runs again; the call in
flight at the kill runs at most once more; the stream holds the whole history with one
``RunResumed`` mark.
"""

from __future__ import annotations

import pytest

from .conftest import TASK_CALLS, Calls, Worker, journaled, run_of
from .crash_app import ANSWER

pytestmark = pytest.mark.timeout(120)

POINTS = ["plan", "schedule", "tool", "joiner"]
EVERY_CALL = [("llm", "planner"), *TASK_CALLS.values(), ("llm", "joiner")]


def check_once_more_at_most(calls: Calls, recorded: set[tuple[str, str]]) -> None:
    """Calls journaled at the kill ran once; the rest (in flight at the kill) at most twice."""
    for call in EVERY_CALL:
        allowed = 1 if call in recorded else 2
        assert 1 <= calls.count(*call) <= allowed, (call, sorted(recorded), calls.lines())


def resumed_once(events: list[dict]) -> dict:
    """The stream's one ``RunResumed`` mark."""
    marks = [e for e in events if e["type"] == "RunResumed"]
    assert len(marks) == 1, [e["type"] for e in events]
    return marks[0]


def answer_of(handler: dict) -> str:
    return handler["result"]["value"]["result"]["response"]["blocks"][0]["text"]


@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_at_any_point_finishes_once_restarted(point, database, calls: Calls, workers):
    first = Worker(database, calls, crash_at=point)
    workers.append(first)
    handler_id = first.start_run()
    calls.wait_for("blocked", point)
    first.kill()  # the run id comes from the store: a worker held at `schedule` answers nothing
    run_id = run_of(database, handler_id)
    recorded = journaled(database, run_id)

    again = Worker(database, calls)
    workers.append(again)
    handler = again.wait_done(handler_id)

    assert handler["status"] == "completed", handler
    assert answer_of(handler) == ANSWER
    events = again.events(handler_id)
    check_once_more_at_most(calls, recorded)
    if point == "joiner":  # the joiner's answer is not committed before it is written
        assert ("llm", "joiner") not in recorded
    assert events[-1]["type"] == "StopEvent"
    if ("llm", "planner") not in recorded and not any(e["type"] == "RunResumed" for e in events):
        return  # killed before anything but its start was committed: it starts again, unmarked
    mark = resumed_once(events)
    assert mark["value"]["worker"] == again.worker


def test_a_tool_declaring_nothing_is_not_called_again_after_a_kill(database, calls: Calls, workers):
    """``slow`` declares no side-effect class (so ``at_most_once``): the worker committed
    its start before the call, by itself; killed in flight, the next worker does not call
    it again, its outcome says so, and the task that needs it is skipped."""
    first = Worker(database, calls, crash_at="tool", undeclared="slow")
    workers.append(first)
    handler_id = first.start_run()
    calls.wait_for("blocked", "tool")
    first.kill()

    again = Worker(database, calls, undeclared="slow")
    workers.append(again)
    handler = again.wait_done(handler_id)
    assert handler["status"] == "completed", handler
    assert calls.count("tool", "slow:gamma") == 1, calls.lines()  # not called again
    assert calls.count("tool", "combine") == 0, calls.lines()  # needs it: skipped
    events = again.events(handler_id)
    results = {e["value"]["task_id"]: e["value"] for e in events if e["type"] == "TaskResult"}
    assert 3 in results, [(e["type"], e["value"]) for e in events][-6:]
    assert results[3]["is_error"] and "unknown" in results[3]["output"].lower()
    assert results[4]["skipped"]


def test_a_sqlite_store_resumes_a_killed_run(tmp_path, calls: Calls, workers):
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    first = Worker(store, calls, crash_at="tool")
    workers.append(first)
    handler_id = first.start_run()
    calls.wait_for("blocked", "tool")
    first.kill()
    run_id = run_of(store, handler_id)
    recorded = journaled(store, run_id)

    again = Worker(store, calls)
    workers.append(again)
    assert answer_of(again.wait_done(handler_id)) == ANSWER
    check_once_more_at_most(calls, recorded)
    resumed_once(again.events(handler_id))
    page_shows_the_resume(again, handler_id)


def page_shows_the_resume(worker: Worker, handler_id: str) -> None:
    """The page replays the whole history with the resume mark; the run list names the worker."""
    from tests.serving.test_browser import FLAGS, chromium_path

    path = chromium_path()
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, headless=True, args=FLAGS)
        try:
            page = browser.new_page()
            page.goto(f"{worker.url}/?run={handler_id}")
            page.wait_for_selector("#answer:not([hidden])")
            assert page.inner_text("#answer") == ANSWER
            mark = page.locator(".round p.resumed")
            assert mark.count() == 1 and worker.worker in mark.inner_text()
            assert page.locator(".node").count() >= 4  # the tasks planned before the crash too
            assert f"@{worker.worker}" in page.inner_text("#runs")
        finally:
            browser.close()
