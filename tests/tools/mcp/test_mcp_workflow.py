"""The compiler over real MCP servers (stdio and streamable HTTP subprocesses)."""

from __future__ import annotations

import asyncio
import os

import pytest
from mcp_fixtures import GARBAGE, PEAKS
from workflows.errors import WorkflowCancelledByUser

from llm_compiler import (
    ConfigurationError,
    LLMCompilerWorkflow,
    MCPConnection,
    TaskReady,
    TaskResult,
    tools_from_mcp,
)
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect

FINISH = "Thought: I have it.\nAction: Finish({})"
pytestmark = pytest.mark.timeout(90)


def results(events):
    return {e.task_id: e for e in events_of(events, TaskResult)}


def compiler(tools, *plans: str, **options) -> LLMCompilerWorkflow:
    """A workflow whose planner writes `plans` in turn (one per run) and finishes."""
    script = [reply for plan in plans for reply in (plan, FINISH.format("done"))]
    return LLMCompilerWorkflow(tools=tools, llm=ScriptedLLM(script), timeout=60, **options)


@pytest.fixture(params=["stdio", "http"])
def peaks_barrier_2(request, http_server):
    """The peaks server whose `height` calls each wait for a second one in flight."""
    if request.param == "stdio":
        return tools_from_mcp(PEAKS, env={"PEAKS_BARRIER": "2"})
    server = http_server(PEAKS, env={**os.environ, "PEAKS_BARRIER": "2"})
    return tools_from_mcp(server.url)


async def test_typed_references_across_parallel_mcp_calls(peaks_barrier_2):
    plan = '1. height("Everest")\n2. height("K2")\n3. subtract($1, $2)\n4. join()'
    async with peaks_barrier_2 as tools:
        wf = compiler(tools, plan)
        out, events = await run_and_collect(wf, user_msg="How much higher is Everest than K2?")
    done = results(events)
    assert [done[i].output for i in (1, 2, 3)] == [8849, 8611, 238]
    assert not any(r.is_error for r in done.values())
    # The server's barrier let neither call return before both were in flight; the
    # engine's timestamps show the same overlap.
    first, second = done[1], done[2]
    assert first.started_at < second.finished_at and second.started_at < first.finished_at
    ready = {e.task_id: e for e in events_of(events, TaskReady)}
    assert ready[3].args == {"a": 8849, "b": 8611}
    assert str(out) == "done"


async def test_structured_text_and_odd_names():
    plan = (
        '1. peak_info("K2")\n2. peak_names()\n3. describe("K2")\n'
        '4. {"peak.rank": {"from_": "K2"}}\n5. join()'
    )
    async with tools_from_mcp(PEAKS, exclude=["crash"]) as tools:
        assert "crash" not in [t.metadata.name for t in tools]
        wf = compiler(tools, plan, "1. pid()\n2. pid()\n3. join()")
        _, events = await run_and_collect(wf, user_msg="q")
        _, again = await run_and_collect(wf, user_msg="again")
        # One session (one server process) for every task of both runs.
        assert tools[0].connection.sessions_opened == 1
        assert len({e.output for e in events_of(again, TaskResult)}) == 1
    done = results(events)
    assert done[1].output == {"name": "K2", "height": 8611}  # an object stays an object
    assert done[2].output == ["Everest", "K2", "Kangchenjunga"]  # {"result": [...]} unwrapped
    assert done[3].output == "K2 is 8611 m high."  # no structured content: the text
    assert done[4].output == 2 and not done[4].is_error


async def test_is_error_is_an_error_observation_with_the_servers_message():
    plan = '1. fail("no road to the summit")\n2. subtract($1, 1)\n3. height("K2")\n4. join()'
    async with tools_from_mcp(PEAKS, include=["fail", "subtract", "height"]) as tools:
        wf = compiler(tools, plan)
        _, events = await run_and_collect(wf, user_msg="q")
    done = results(events)
    assert done[1].is_error and "no road to the summit" in done[1].output
    assert done[1].output.startswith("Error: ToolError:")
    assert done[2].skipped and done[3].output == 8611


async def test_a_crash_is_an_error_observation_and_the_next_run_reconnects(tmp_path):
    flag = tmp_path / "crashed"
    async with tools_from_mcp(PEAKS) as tools:
        connection = tools[0].connection
        wf = compiler(tools, "1. crash()\n2. join()", '1. height("K2")\n2. join()')
        out, events = await run_and_collect(wf, user_msg="first")
        crash = results(events)[1]
        assert crash.is_error and "closed the connection during crash" in crash.output
        assert "crashing on purpose" in crash.output  # the server's last words
        assert str(out) == "done"
        _, events = await run_and_collect(wf, user_msg="second")
        assert results(events)[1].output == 8611
        assert connection.sessions_opened == 2
    assert not flag.exists()


async def test_a_server_that_no_longer_starts_is_an_error_observation(tmp_path):
    flag = tmp_path / "crashed"
    async with tools_from_mcp(PEAKS, env={"PEAKS_BROKEN_FLAG": str(flag)}) as tools:
        wf = compiler(tools, "1. crash()\n2. join()", '1. height("K2")\n2. height("Everest")')
        await run_and_collect(wf, user_msg="first")
        out, events = await run_and_collect(wf, user_msg="second")
    done = results(events)
    for task in (1, 2):
        assert done[task].is_error and "failed to start" in done[task].output
        assert "refusing to start" in done[task].output
    assert str(out) == "done"


async def test_a_hung_call_times_out_and_is_cancelled_on_the_server():
    async with tools_from_mcp(PEAKS) as tools:
        connection = tools[0].connection
        wf = compiler(tools, '1. hang("x")\n2. join()', tool_timeout=1)
        out, events = await run_and_collect(wf, user_msg="q")
        assert results(events)[1].output == "Error: hang timed out after 1 s."
        cancelled = await connection.call_tool("wait_until", {"key": "cancelled", "at_least": 1})
        assert cancelled.structured_content == {"result": 1}
        assert str(out) == "done"


async def test_cancelling_a_run_cancels_its_mcp_calls(http_server):
    server = http_server(PEAKS)
    async with tools_from_mcp(server.url) as tools:
        connection = tools[0].connection
        wf = compiler(tools, '1. hang("a")\n2. hang("b")\n3. join()')
        handler = wf.run(user_msg="q")
        started = 0
        async for ev in handler.stream_events():
            started += isinstance(ev, TaskReady)
            if started == 2:
                break
        in_flight = await connection.call_tool("wait_until", {"key": "in_flight", "at_least": 2})
        assert in_flight.structured_content == {"result": 2}
        await handler.cancel_run()
        with pytest.raises(WorkflowCancelledByUser):
            await handler
        cancelled = await connection.call_tool("wait_until", {"key": "cancelled", "at_least": 2})
        assert cancelled.structured_content == {"result": 2}


async def test_garbage_is_an_error_observation():
    async with tools_from_mcp(GARBAGE, call_timeout=2) as tools:
        wf = compiler(tools, "1. noise()\n2. babble()\n3. join()")
        out, events = await run_and_collect(wf, user_msg="q")
    done = results(events)
    assert done[1].is_error and "failed noise: ValidationError" in done[1].output
    assert done[2].is_error and "timed out" in done[2].output
    assert str(out) == "done"


async def test_an_http_server_that_died_is_an_error_observation(http_server):
    server = http_server(PEAKS)
    async with tools_from_mcp(server.url, include=["height"]) as tools:
        wf = compiler(tools, '1. height("K2")\n2. join()', '1. height("K2")\n2. join()')
        _, events = await run_and_collect(wf, user_msg="first")
        assert results(events)[1].output == 8611
        server.stop()
        out, events = await asyncio.wait_for(run_and_collect(wf, user_msg="second"), 30)
    second = results(events)[1]
    assert second.is_error and "MCPServerError" in second.output
    assert str(out) == "done"


async def test_headers_reach_an_http_server(http_server):
    server = http_server(PEAKS)
    async with tools_from_mcp(server.url, include=["header"], headers={"X-Team": "ops"}) as tools:
        wf = compiler(tools, '1. header("x-team")\n2. join()')
        _, events = await run_and_collect(wf, user_msg="q")
    assert results(events)[1].output == "ops"


async def test_two_servers_with_the_same_tools_need_a_prefix():
    with pytest.raises(ConfigurationError, match="Two MCP tools are named 'height'.*prefix"):
        await tools_from_mcp(PEAKS, PEAKS)
    plan = '1. a_height("Everest")\n2. b_height("K2")\n3. a_subtract($1, $2)\n4. join()'
    servers = MCPConnection(PEAKS, prefix="a_"), MCPConnection(PEAKS, prefix="b_")
    async with tools_from_mcp(*servers, include=["a_height", "a_subtract", "b_height"]) as tools:
        assert sorted(t.metadata.name for t in tools) == ["a_height", "a_subtract", "b_height"]
        wf = compiler(tools, plan)
        _, events = await run_and_collect(wf, user_msg="How much higher is Everest than K2?")
        # Each server was called under its own names; the plan used the prefixed ones.
        assert [c.sessions_opened for c in servers] == [1, 1]
    done = results(events)
    assert [done[i].output for i in (1, 2, 3)] == [8849, 8611, 238]
    assert {e.tool_name for e in events_of(events, TaskReady)} == {
        "a_height",
        "b_height",
        "a_subtract",
    }
