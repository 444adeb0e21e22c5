"""When the journal commits, in process (SQLite): a barrier or the lazy timer starts a
commit, so the results of parallel tasks settle in one commit rather than one each; a
request for a verdict is published only once the facts it rests on are committed."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from llm_compiler import LLMCompilerWorkflow, TaskApprovalRequest, policy
from llm_compiler.durable import durable_runtime, journal
from llm_compiler.durable.facts import fold
from llm_compiler.testing import ScriptedLLM

pytestmark = pytest.mark.timeout(120)

NINE = "\n".join(f'{i}. fetch("k{i}")' for i in range(1, 10)) + "\n10. join()"
FINISH = "Thought: done.\nAction: Finish(all values)"


async def fetch(name: str) -> str:
    """Fetch a value."""
    return f"value of {name}"


def scripted(runtime: Any, plan: str, *tools: Any) -> LLMCompilerWorkflow:
    """A workflow on `runtime` whose planner writes `plan`, with `fetch` (pure) and `tools`."""
    return LLMCompilerWorkflow(
        tools=[policy(side_effect="pure")(fetch), *tools],
        llm=ScriptedLLM(lambda call: FINISH if "Finish(" in call.prompt else plan),
        runtime=runtime,
        timeout=30,
    )


def counted_commits(runtime: Any) -> list[list[str]]:
    """The kinds of the fact rows in each commit `runtime`'s journal makes from now on."""
    commits: list[list[str]] = []
    write = runtime.journal.driver.write

    async def counted(batch: Any, runs: set[str], epochs: Any) -> Any:
        commits.append([args[1] for _, rows in batch for args in rows if len(args) == 4])
        return await write(batch, runs, epochs)

    runtime.journal.driver.write = counted
    return commits


def committed_rows(db: Path, run_id: str) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        sql = "SELECT kind, key, body FROM llmc_facts WHERE run_id = ?"
        return [(str(k), str(key), str(b)) for k, key, b in conn.execute(sql, (run_id,))]


async def test_results_of_parallel_tasks_share_a_commit(tmp_path, monkeypatch):
    monkeypatch.setattr(journal, "LAZY_COMMIT", 30.0)  # only barriers start commits here
    runtime = durable_runtime(f"sqlite:///{tmp_path / 'j.db'}")
    wf = scripted(runtime, NINE)
    await runtime.launch()
    commits = counted_commits(runtime)
    try:
        assert str(await wf.run(user_msg="nine", run_id=uuid.uuid4().hex)) == "all values"
    finally:
        await runtime.destroy()
    with_results = [kinds for kinds in commits if "result" in kinds]
    assert sum(kinds.count("result") for kinds in with_results) == 9
    # One commit per result once; now they go together, with the answer.
    assert len(with_results) == 1, commits
    assert len(commits) <= 6, commits


async def test_the_joiner_starts_at_once_and_its_answer_is_committed_with_what_it_read(
    tmp_path, monkeypatch
):
    """The joiner does not wait for its results' commit; the answer's commit holds them
    (commits are in order), and the answer is returned only once committed. Commits are
    held until the joiner was asked (5 s at most: a joiner that waits for one is asked
    only after it, and sees the results committed)."""
    monkeypatch.setattr(journal, "LAZY_COMMIT", 30.0)  # only barriers start commits here
    db = tmp_path / "j.db"
    runtime = durable_runtime(f"sqlite:///{db}")
    run_id = uuid.uuid4().hex
    at_joiner: list[set[str]] = []
    asked = asyncio.Event()

    def reply(call: Any) -> str:
        if "Finish(" not in call.prompt:
            return '1. fetch("a")\n2. fetch("b")\n3. join()'
        at_joiner.append({kind for kind, _, _ in committed_rows(db, run_id)})
        asked.set()
        return FINISH

    wf = LLMCompilerWorkflow(
        tools=[policy(side_effect="pure")(fetch)],
        llm=ScriptedLLM(reply),
        runtime=runtime,
        timeout=30,
    )
    await runtime.launch()
    commits = counted_commits(runtime)
    write = runtime.journal.driver.write

    async def held(batch: Any, runs: set[str], epochs: Any) -> Any:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asked.wait(), 5)
        return await write(batch, runs, epochs)

    runtime.journal.driver.write = held
    try:
        assert str(await wf.run(user_msg="two", run_id=run_id)) == "all values"
        state = fold(committed_rows(db, run_id))  # committed when the answer was returned
    finally:
        await runtime.destroy()
    assert len(at_joiner) == 1 and "result" not in at_joiner[0], at_joiner
    assert state is not None and state.answer == "all values" and len(state.outcomes) == 2
    # The answer's commit holds the results it rests on, or follows the one that does.
    answered = max(i for i, kinds in enumerate(commits) if "head" in kinds)
    assert sum(kinds.count("result") for kinds in commits[: answered + 1]) == 2, commits


async def test_a_verdict_request_is_committed_before_a_client_sees_it(tmp_path):
    db = tmp_path / "j.db"
    runtime = durable_runtime(f"sqlite:///{db}")
    paid: list[str] = []

    @policy(side_effect="at_most_once", requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    wf = scripted(runtime, '1. fetch("price")\n2. pay($1)\n3. join()', pay)
    await runtime.launch()
    run_id = uuid.uuid4().hex
    try:
        handler = wf.run(user_msg="pay?", run_id=run_id)
        async for ev in handler.stream_events():
            if isinstance(ev, TaskApprovalRequest):
                # The hold the verdict answers stands in the journal: a worker resuming
                # the run from there holds the same task (the fetch before it settled).
                state = fold(committed_rows(db, run_id))
                assert state is not None and 1 in state.outcomes and 2 not in state.outcomes
                handler.ctx.send_event(ev.respond())
        assert str(await handler) == "all values" and paid == ["value of price"]
    finally:
        await runtime.destroy()


async def test_a_call_that_is_not_pure_starts_on_committed_inputs(tmp_path, monkeypatch):
    """An idempotent call runs on facts that survive a crash (its plan line, its input's
    result), though no barrier of another step asked for their commit."""
    monkeypatch.setattr(journal, "LAZY_COMMIT", 30.0)
    db = tmp_path / "j.db"
    runtime = durable_runtime(f"sqlite:///{db}")
    seen: list[set[str]] = []
    run_id = uuid.uuid4().hex

    @policy(side_effect="idempotent")
    async def store(value: str) -> str:
        """Store a value."""
        seen.append({f"{kind}:{key}" for kind, key, _ in committed_rows(db, run_id)})
        return "stored"

    wf = scripted(runtime, '1. fetch("price")\n2. store($1)\n3. join()', store)
    await runtime.launch()
    try:
        assert str(await wf.run(user_msg="store", run_id=run_id)) == "all values"
    finally:
        await runtime.destroy()
    assert len(seen) == 1 and {"task:2", "result:0:1"} <= seen[0], seen
