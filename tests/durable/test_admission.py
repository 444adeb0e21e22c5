"""Runs of one store as every caller meets them: a live run's state is never dropped
however many runs end meanwhile; a new run id is started at most once, by whichever
runtime claims it first (the others get that run)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from llm_compiler import LLMCompilerWorkflow, TaskApprovalRequest, policy
from llm_compiler.durable import durable_runtime
from llm_compiler.durable import runtime as durable_runtime_module
from llm_compiler.testing import ScriptedLLM

pytestmark = pytest.mark.timeout(240)

FINISH = "Thought: done.\nAction: Finish(all values)"


async def fetch(name: str) -> str:
    """Fetch a value."""
    return f"value of {name}"


def scripted(runtime: Any, plan: str, *tools: Any, calls: list[str] | None = None) -> Any:
    """A workflow on `runtime` whose planner writes `plan` (each model call noted in `calls`)."""

    def answer(call: Any) -> str:
        joiner = "Finish(" in call.prompt
        if calls is not None:
            calls.append("joiner" if joiner else "planner")
        return FINISH if joiner else plan

    return LLMCompilerWorkflow(
        tools=[policy(side_effect="pure")(fetch), *tools],
        llm=ScriptedLLM(answer),
        runtime=runtime,
        timeout=60,
    )


async def test_a_held_run_keeps_its_state_while_more_runs_than_kept_end(tmp_path):
    """A run waiting for a verdict while more runs end than the runtime keeps finished
    states of: the verdict still reaches it, and the held call runs once."""
    runtime = durable_runtime(f"sqlite:///{tmp_path / 'j.db'}")
    paid: list[str] = []

    @policy(side_effect="at_most_once", requires_approval=True)
    async def pay(amount: str) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"

    held = scripted(runtime, '1. fetch("price")\n2. pay($1)\n3. join()', pay)
    quick = scripted(runtime, '1. fetch("x")\n2. join()')
    await runtime.launch()
    try:
        handler = held.run(user_msg="pay?", run_id=uuid.uuid4().hex)
        events = handler.stream_events()
        request = None
        async for ev in events:
            if isinstance(ev, TaskApprovalRequest):
                request = ev
                break
        assert request is not None
        for _ in range(durable_runtime_module.STATES_KEPT + 44):  # 300 runs end meanwhile
            assert str(await quick.run(user_msg="quick", run_id=uuid.uuid4().hex)) == "all values"
        handler.ctx.send_event(request.respond())
        async for _ in events:
            pass
        assert str(await asyncio.wait_for(handler, 60)) == "all values"
        assert paid == ["value of price"]
    finally:
        await runtime.destroy()


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    return str(request.getfixturevalue("database"))


async def test_a_new_run_id_is_claimed_once_by_concurrent_journals(store_url):
    """Two journals claim one new id (and one handler id) at once: one wins, the other
    finds the row, and the run has one start."""
    from llm_compiler.durable.config import DurableConfig
    from llm_compiler.durable.journal import Journal, RunRecord

    journals = [Journal(DurableConfig.build(store_url, worker=w)) for w in ("A", "B")]
    for journal in journals:
        await journal.open()
    try:
        won = await asyncio.gather(
            *(
                j.create(RunRecord("run-42", "order-42", "agent", owner=w, epoch=1), f'"{w}"')
                for j, w in zip(journals, "AB", strict=True)
            )
        )
        other = RunRecord("run-43", "order-42", "agent", owner="A", epoch=1)
        assert not await journals[0].create(other, '"again"')  # a handler id names one run
        record = await journals[0].record("run-42")
        starts = await journals[1].fetch("SELECT body FROM llmc_facts WHERE kind = 'start'")
    finally:
        for journal in journals:
            await journal.close()
    assert sorted(won) == [False, True]
    winner = "AB"[won.index(True)]
    assert record is not None and record.owner == winner and record.epoch == 1
    assert starts == [(f'"{winner}"',)]


async def test_one_new_run_id_on_two_runtimes_runs_once(database):
    """Two workers asked for one new run id at once: the planner and the tool run once,
    and both callers get the run's answer (the second follows the first's run)."""
    calls: list[str] = []
    called = asyncio.Event()
    gate = asyncio.Event()

    async def pay(amount: str) -> str:  # at most once: declared nothing
        """Pay an amount."""
        calls.append(f"pay {amount}")
        called.set()
        await gate.wait()
        return f"paid {amount}"

    runtimes = [durable_runtime(database, worker=w) for w in ("A", "B")]
    flows = [scripted(rt, '1. pay("5")\n2. join()', pay, calls=calls) for rt in runtimes]
    for rt in runtimes:
        await rt.launch()
    try:
        runs = [asyncio.ensure_future(wf.run(user_msg="pay", run_id="order-42")) for wf in flows]
        await asyncio.wait_for(called.wait(), 60)
        gate.set()
        answers = await asyncio.wait_for(asyncio.gather(*runs), 120)
    finally:
        for rt in runtimes:
            await rt.destroy()
    assert [str(a) for a in answers] == ["all values", "all values"]
    assert calls.count("planner") == 1 and calls.count("pay 5") == 1, calls


async def test_a_new_run_is_refused_at_once_while_the_store_does_not_answer(tmp_path, monkeypatch):
    """In your own process too: a run asked for while the store does not answer raises
    at once, and nothing of it is started or written."""
    import sqlite3

    from llm_compiler.durable.backend import Durable
    from llm_compiler.errors import Unavailable

    calls: list[str] = []
    runtime = durable_runtime(f"sqlite:///{tmp_path / 'j.db'}")
    wf = scripted(runtime, '1. fetch("x")\n2. join()', calls=calls)
    await runtime.launch()
    try:
        # What a process sees in an outage (its journal or lock connection lost).
        monkeypatch.setattr(Durable, "degraded", property(lambda self: True))
        with pytest.raises(Unavailable, match="does not answer"):
            await asyncio.wait_for(wf.run(user_msg="quick", run_id="order-9"), 30)
        monkeypatch.undo()
    finally:
        await runtime.destroy()
    assert calls == []
    with sqlite3.connect(tmp_path / "j.db") as db:
        assert db.execute("SELECT count(*) FROM llmc_runs").fetchone() == (0,)
