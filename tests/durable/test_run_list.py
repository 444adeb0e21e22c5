"""The served run list on a durable store: one ordered, limited query a page, every run
listed once, however many there are (the store's general query stops at 1,000)."""

from __future__ import annotations

import pytest

from llm_compiler.durable.journal import RunRecord
from llm_compiler.durable.store import open_durable
from llm_compiler.serving.app import recent_runs

pytestmark = pytest.mark.timeout(180)
RUNS = 1205


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("database"))


async def test_the_run_list_pages_through_every_run_once(store: str) -> None:
    durable = await open_durable(store)
    await durable.start()
    try:
        journal = durable.journal
        start = 1_780_000_000.123456789  # more digits than a cursor's round trip keeps
        expected = []
        for i in range(RUNS):
            at = start + (i // 3) * 0.000_000_3  # ties: three runs share each start time
            journal.put_run(
                RunRecord(f"r{i:04d}", f"h{i:04d}", "compiler", "completed", None, started_at=at)
            )
            expected.append((at, f"h{i:04d}"))
        journal.put_run(RunRecord("other", "h-other", "another", "completed", started_at=start + 9))
        await journal.commit()
        expected.sort(reverse=True)

        seen: list[str] = []
        cursor = None
        while True:
            before = _key(cursor)
            runs, cursor = await recent_runs(durable.store, ["compiler"], set(), 200, before)
            seen += [run["handler_id"] for run in runs]
            if cursor is None:
                break
        assert seen == [handler for _, handler in expected]  # all, once, newest first
    finally:
        await durable.stop()


def _key(cursor: str | None) -> tuple[float, str] | None:
    """The key a ``before`` cursor names (as ``/api/runs`` reads it)."""
    if cursor is None:
        return None
    at, _, handler = cursor.partition("~")
    return float(at), handler
