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
