"""Crash points in process: a run is frozen at a chosen point (its context saved there,
as a durable store would hold it), abandoned, and resumed from the saved context on a
fresh workflow instance. The resumed run finishes with the same answer; no finished tool,
planner or joiner call runs again.

Also: duplicate, late and forged engine events, and idempotent starts.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from workflows import Context
from workflows.errors import WorkflowCancelledByUser

from llm_compiler import LLMCompilerWorkflow, PlanEvent, TaskReady, TaskResult, idempotency_key
from llm_compiler.engine.scheduler import Decision
from llm_compiler.engine.state import CompilerState
from llm_compiler.testing import LLMCall, ScriptedLLM

PLAN = '1. lookup("a")\n2. lookup("b")\n3. slow($1)\n4. lookup($2)\n5. join()'
ANSWER = "Thought: I have both.\nAction: Finish(A and B combined)"
OUTPUTS = {1: "A", 2: "B", 3: "<A>", 4: "B"}


class Harness:
    """Tools, LLM and a workflow that freeze the run at `crash` (saving its context)."""

    def __init__(self, crash: str | None = None) -> None:
        self.crash = crash
        self.calls: list[str] = []
        self.keys: list[tuple[str, str | None]] = []
        self.saved: dict[str, Any] | None = None
        self.frozen = asyncio.Event()
        self.handler: Any = None
        self.done_lookups = asyncio.Event()
        harness = self

        async def lookup(x: str) -> str:
            """Look up x."""
            harness.calls.append(f"lookup {x}")
            harness.keys.append((f"lookup {x}", idempotency_key()))
            if sum(c.startswith("lookup") for c in harness.calls) >= 2:
                harness.done_lookups.set()
            return x.upper()

        async def slow(x: str) -> str:
            """Combine x."""
            harness.calls.append(f"slow {x}")
            harness.keys.append((f"slow {x}", idempotency_key()))
            if harness.crash == "tool":
                await harness.freeze()
            return f"<{x}>"

        class LLM(ScriptedLLM):
            phase: str = ""

            def __init__(self) -> None:
                super().__init__(self.script)

            def script(self, call: LLMCall) -> str:
                self.phase = "joiner" if "Action: Finish(" in call.prompt else "planner"
                harness.calls.append(self.phase)
                return ANSWER if self.phase == "joiner" else PLAN

            async def on_chunk(self, index: int, chunk: str) -> None:
                if harness.crash == "plan" and self.phase == "planner" and "slow" in chunk:
                    await harness.done_lookups.wait()
                    for _ in range(50):  # let the scheduler settle both results
                        await asyncio.sleep(0)
                    await harness.freeze()
                if harness.crash == "join" and self.phase == "joiner" and index == 3:
                    await harness.freeze()

        class Workflow(LLMCompilerWorkflow):
            def _emit(self, ctx: Any, state: CompilerState, decision: Decision) -> None:
                if harness.crash == "schedule" and any(t.id == 3 for t, _ in decision.dispatch):
                    harness.save()  # the facts that dispatch task 3 are written
                    harness.frozen.set()
                    raise asyncio.CancelledError  # nothing is emitted
                super()._emit(ctx, state, decision)

        self.workflow = Workflow(tools=[lookup, slow], llm=LLM(), timeout=30)

    def save(self) -> None:
        if self.saved is None:
            self.saved = json.loads(json.dumps(self.handler.ctx.to_dict()))

    async def freeze(self) -> None:
        self.save()
        self.frozen.set()
        await asyncio.Event().wait()  # the process "dies" here


async def crashed_then_resumed(
    crash: str, run_id: str = ""
) -> tuple[Harness, Harness, Any, CompilerState]:
    first = Harness(crash)
    first.handler = first.workflow.run(user_msg="q", run_id=run_id or uuid.uuid4().hex)
    await asyncio.wait_for(first.frozen.wait(), 10)
    await first.handler.cancel_run()
    with pytest.raises((WorkflowCancelledByUser, asyncio.CancelledError)):
        await first.handler
    assert first.saved is not None and first.saved["is_running"]
    second = Harness()
    ctx = Context.from_dict(second.workflow, first.saved)
    saved = await ctx.store.get_state()
    out = await asyncio.wait_for(second.workflow.run(ctx=ctx), 20)
    return first, second, out, saved


@pytest.mark.parametrize("crash", ["plan", "schedule", "tool", "join"])
async def test_a_run_resumed_from_any_crash_point_finishes_with_the_same_answer(crash):
    first, second, out, saved = await crashed_then_resumed(crash)
    assert str(out) == "A and B combined"
    assert {t.id: t.output for t in out.summary.tasks} == OUTPUTS
    assert out.summary.replans == 0 and len(out.summary.tasks) == 4
    both = first.calls + second.calls
    calls = {1: "lookup a", 2: "lookup b", 3: "slow A", 4: "lookup B"}
    for tid, call in calls.items():
        assert both.count(call) <= 2, both  # a call in flight runs at most once more
        if tid in saved.outcomes:
            assert call not in second.calls, both  # a settled call never runs again
    assert {1, 2} <= set(saved.outcomes) or crash in ("schedule", "tool")
    if crash == "tool":
        assert both.count("slow A") == 2, both
    assert both.count("planner") == (2 if crash == "plan" else 1), both
    assert both.count("joiner") == (2 if crash == "join" else 1), both


async def test_a_call_run_again_has_the_same_idempotency_key():
    first, second, _, _ = await crashed_then_resumed("tool", run_id="keyed-run")
    assert ("slow A", "keyed-run:0:3") in first.keys
    assert ("slow A", "keyed-run:0:3") in second.keys  # the same key, attempt after attempt


async def test_a_duplicate_or_forged_result_neither_settles_nor_completes_the_round():
    release = asyncio.Event()
    ran: list[str] = []

    async def fast(x: str) -> str:
        """Fast."""
        ran.append(x)
        return x

    async def slow(x: str) -> str:
        """Slow until released."""
        await release.wait()
        ran.append(x)
        return x.upper()

    llm = ScriptedLLM(['1. fast("a")\n2. slow("b")\n3. fast($2)\n4. join()', ANSWER])
    wf = LLMCompilerWorkflow(tools=[fast, slow], llm=llm, timeout=20)
    handler = wf.run(user_msg="q")
    async for ev in handler.stream_events():
        if isinstance(ev, TaskResult) and ev.task_id == 1:
            dup = ev.model_copy(update={"event_id": "another", "output": "forged"})
            handler.ctx.send_event(dup)  # a second result for task 1
            # A result for task 3 (blocked: not running) and for a task not in the plan.
            handler.ctx.send_event(ev.model_copy(update={"event_id": "x", "task_id": 3}))
            handler.ctx.send_event(ev.model_copy(update={"event_id": "y", "task_id": 99}))
            handler.ctx.send_event(
                TaskReady(round=0, run_id=ev.run_id, task_id=7, tool_name="fast")
            )
            handler.ctx.send_event(
                TaskReady(round=0, run_id=ev.run_id, task_id=1, tool_name="fast")
            )
            # Rounds that do not exist (an IndexError in the scheduler before).
            handler.ctx.send_event(ev.model_copy(update={"event_id": "z", "round": 5}))
            handler.ctx.send_event(
                TaskReady(round=9, run_id=ev.run_id, task_id=2, tool_name="slow")
            )
            handler.ctx.send_event(PlanEvent(round=3, run_id=ev.run_id, complete=True))
            for _ in range(100):
                await asyncio.sleep(0)
            release.set()
    out = await handler
    assert {t.id: t.output for t in out.summary.tasks} == {1: "a", 2: "B", 3: "B"}
    assert ran == ["a", "b", "B"]  # the forged TaskReady events ran nothing
    assert len(llm.calls) == 2  # the joiner waited for task 2


async def test_starting_a_run_twice_with_one_run_id_keeps_its_state():
    first = Harness("plan")
    first.handler = first.workflow.run(user_msg="q", run_id="same-run")
    await asyncio.wait_for(first.frozen.wait(), 10)
    await first.handler.cancel_run()
    with pytest.raises((WorkflowCancelledByUser, asyncio.CancelledError)):
        await first.handler
    # The start step runs again on the saved context (it was in flight): same run id.
    second = Harness()
    ctx = Context.from_dict(second.workflow, first.saved)
    state = await ctx.store.get_state()
    assert state.run_id == "same-run" and sorted(state.outcomes) == [1, 2]
    out = await second.workflow.run(ctx=ctx)
    assert {t.id: t.output for t in out.summary.tasks} == OUTPUTS


async def test_a_replan_recorded_before_a_crash_is_not_asked_again():
    saved: dict[str, Any] = {}
    frozen = asyncio.Event()
    llm_calls: list[str] = []
    ran: list[str] = []
    handler: Any = None

    async def lookup(x: str) -> str:
        """Look up x."""
        ran.append(x)
        return x.upper()

    def script(call: LLMCall) -> str:
        joiner = "Action: Finish(" in call.prompt
        round = sum(c.startswith("planner") for c in llm_calls) - 1
        llm_calls.append(f"{'joiner' if joiner else 'planner'} {round if joiner else round + 1}")
        if not joiner:
            return '1. lookup("a")\n2. join()' if round < 0 else "3. lookup($1)\n4. join()"
        if round == 0:
            return "Thought: not enough.\nAction: Replan(look again)"
        return "Thought: done.\nAction: Finish(A)"

    class Workflow(LLMCompilerWorkflow):
        async def _replan(self, ctx: Any, state: Any, round: int, decision: Any) -> Any:
            replan = await super()._replan(ctx, state, round, decision)
            if not saved:  # the verdict is written; the step has not returned
                saved.update(json.loads(json.dumps(handler.ctx.to_dict())))
                frozen.set()
                await asyncio.Event().wait()
            return replan

    handler = Workflow(tools=[lookup], llm=ScriptedLLM(script), timeout=20).run(user_msg="q")
    await asyncio.wait_for(frozen.wait(), 10)
    await handler.cancel_run()
    with pytest.raises((WorkflowCancelledByUser, asyncio.CancelledError)):
        await handler
    fresh = LLMCompilerWorkflow(tools=[lookup], llm=ScriptedLLM(script), timeout=20)
    out = await fresh.run(ctx=Context.from_dict(fresh, saved))
    assert str(out) == "A" and out.summary.replans == 1
    assert llm_calls == ["planner 0", "joiner 0", "planner 1", "joiner 1"]  # none again
    assert ran == ["a", "A"]
