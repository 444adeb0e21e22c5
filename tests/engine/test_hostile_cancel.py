"""Items 2, 3, 10: cancellation reaches every tool; a cancelled turn never leaks into the next."""

from __future__ import annotations

import asyncio

import pytest
from hostile_helpers import FINISH, Gate, results
from workflows import Context

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import ScriptedLLM, run_and_collect


def _forever_tool(started: Gate, cancelled: Gate):
    async def forever(x: str) -> str:
        """Runs until cancelled."""
        started.open()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.open()
            raise
        return "never"

    return forever


@pytest.mark.timeout(20)
async def test_wait_for_timing_out_on_the_handler_cancels_running_tools():
    started, cancelled = Gate(), Gate()
    llm = ScriptedLLM(['1. forever("a")\n2. join()'])
    wf = LLMCompilerWorkflow(tools=[_forever_tool(started, cancelled)], llm=llm, timeout=None)
    handler = wf.run(user_msg="q")

    async def wait_then_give_up() -> None:
        await started.wait()
        await asyncio.wait_for(handler, 0.05)

    with pytest.raises((TimeoutError, asyncio.TimeoutError)):
        await wait_then_give_up()
    await cancelled.wait()


@pytest.mark.timeout(20)
async def test_cancelling_the_task_that_awaits_the_handler_cancels_running_tools():
    started, cancelled = Gate(), Gate()
    llm = ScriptedLLM(['1. forever("a")\n2. forever("b")\n3. join()'])
    wf = LLMCompilerWorkflow(tools=[_forever_tool(started, cancelled)], llm=llm, timeout=None)

    async def ask() -> object:
        return await wf.run(user_msg="q")

    task = asyncio.create_task(ask())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await cancelled.wait()


class _ToolCancelled(BaseException):
    """Not an exception a tool should raise, but one it may."""


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "exc", [asyncio.CancelledError(), _ToolCancelled("odd"), GeneratorExit()], ids=repr
)
async def test_a_tool_raising_a_base_exception_is_an_error_observation(exc):
    async def weird(x: str) -> str:
        """Raises."""
        raise exc

    async def fine(x: str) -> str:
        """Works."""
        return x.upper()

    plan = '1. weird("a")\n2. fine("b")\n3. fine($1)\n4. join()'
    llm = ScriptedLLM([plan, FINISH.format("done")])
    wf = LLMCompilerWorkflow(tools=[weird, fine], llm=llm, timeout=15)
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "done"
    done = results(events)
    assert done[1].is_error and type(exc).__name__ in done[1].output
    assert done[2].output == "B" and not done[2].is_error
    assert done[3].skipped


@pytest.mark.timeout(30)
async def test_a_cancelled_turn_never_counts_toward_the_next_question():
    """Cancel a turn while its tools are gated; the next question on the same context
    joins only after all of its own tasks, never on the old run's late results."""
    release_old, old_running = asyncio.Event(), Gate()
    old_started = 0

    async def slow(x: str) -> str:
        """The first turn's tools block until released; later ones answer at once."""
        nonlocal old_started
        if x.startswith("old"):
            old_started += 1
            if old_started == 3:
                old_running.open()
            try:
                await release_old.wait()
            except asyncio.CancelledError:
                await release_old.wait()  # finishes late, after the cancellation
            return f"late {x}"
        return f"fresh {x}"

    second_gate = asyncio.Event()

    async def gated(x: str) -> str:
        """The second turn's third task waits for the test."""
        await second_gate.wait()
        return f"gated {x}"

    plans = iter(
        [
            '1. slow("old1")\n2. slow("old2")\n3. slow("old3")\n4. join()',
            '1. slow("new1")\n2. slow("new2")\n3. gated("new3")\n4. join()',
        ]
    )
    joined: list[str] = []

    def script(call):
        if "Action" in call.prompt and "Observation" in call.prompt:
            joined.append(call.prompt)
            return FINISH.format("second answer")
        return next(plans)

    wf = LLMCompilerWorkflow(tools=[slow, gated], llm=ScriptedLLM(script), timeout=20)
    ctx = Context(wf)
    first = wf.run(user_msg="first", ctx=ctx)
    await old_running.wait()
    await first.cancel_run()
    second = wf.run(user_msg="second", ctx=ctx)
    await asyncio.sleep(0)
    release_old.set()  # the old run's three tools now finish, late
    for _ in range(50):  # let the late results flow through the context
        await asyncio.sleep(0)
    assert joined == []  # the new round has not joined on old results
    second_gate.set()
    out = await second
    assert str(out) == "second answer"
    assert len(joined) == 1
    assert "gated new3" in joined[0] and "late old" not in joined[0]
    state = await ctx.store.get_state()
    assert sorted(o.output for o in state.outcomes.values()) == [
        "fresh new1",
        "fresh new2",
        "gated new3",
    ]


@pytest.mark.timeout(20)
async def test_wait_for_timing_out_cancels_every_tool_of_the_run():
    # llama-index-workflows leaves the step tasks of its last scheduling pass running
    # when the awaiter is cancelled: all three calls start in one pass here.
    started = {x: Gate() for x in "abc"}
    cancelled = {x: Gate() for x in "abc"}
    finished: list[str] = []

    async def slow(x: str) -> str:
        """Runs for a long time."""
        started[x].open()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled[x].open()
            raise
        finished.append(x)
        return x

    llm = ScriptedLLM(['1. slow("a")\n2. slow("b")\n3. slow("c")\n4. join()'])
    wf = LLMCompilerWorkflow(tools=[slow], llm=llm, timeout=None)
    handler = wf.run(user_msg="q")

    async def wait_then_give_up() -> None:
        for gate in started.values():
            await gate.wait()
        await asyncio.wait_for(handler, 0.05)

    with pytest.raises((TimeoutError, asyncio.TimeoutError)):
        await wait_then_give_up()
    for gate in cancelled.values():
        await asyncio.wait_for(gate.wait(), 5)
    assert finished == []
