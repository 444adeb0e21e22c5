"""Tool outputs as values: MCP results, ToolOutputs and pydantic models."""

from __future__ import annotations

import asyncio
import base64
import os
import sys

import pytest
from blockbuster import blockbuster_ctx
from llama_index.core.tools import FunctionTool, ToolOutput
from mcp.types import (
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from mcp_fixtures import PEAKS
from pydantic import BaseModel

from llm_compiler import ConfigurationError, LLMCompilerWorkflow, MCPServerError, TaskResult
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect
from llm_compiler.tools import ToolError, call_tool, tool_value, tools_from_mcp
from llm_compiler.tools.results import call_result_value

FINISH = "Thought: I have it.\nAction: Finish(done)"


def text(t: str) -> TextContent:
    return TextContent(type="text", text=t)


class Peak(BaseModel):
    name: str
    height: int


@pytest.mark.parametrize(
    ("result", "value"),
    [
        (CallToolResult(content=[text("8611")], structured_content={"result": 8611}), 8611),
        (CallToolResult(content=[], structured_content={"result": None}), None),
        (
            CallToolResult(content=[], structured_content={"a": 1, "result": 2}),
            {"a": 1, "result": 2},
        ),
        (CallToolResult(content=[text("one"), text("two")]), "one\ntwo"),
        (CallToolResult(content=[]), None),
    ],
)
def test_call_results_become_values(result, value):
    assert tool_value(result) == value


def test_a_declared_object_with_one_result_key_stays_an_object():
    result = CallToolResult(content=[], structured_content={"result": 1})
    assert call_result_value(result, {"properties": {"result": {"type": "integer"}}}) == 1
    schema = {"properties": {"score": {}}}
    assert call_result_value(result, schema) == {"result": 1}


def test_images_and_resources_are_described_not_dumped():
    png = base64.b64encode(b"\x89PNG" + bytes(2000)).decode()
    result = CallToolResult(
        content=[
            text("Here:"),
            ImageContent(type="image", data=png, mime_type="image/png"),
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri="file:///a.txt", mime_type="text/plain", text="x" * 50
                ),
            ),
            ResourceLink(type="resource_link", uri="file:///b.csv", name="b.csv"),
        ]
    )
    assert tool_value(result).splitlines() == [
        "Here:",
        "[image: image/png, 2004 bytes]",
        "[resource: file:///a.txt, text/plain, 50 characters]",
        "[resource link: b.csv file:///b.csv]",
    ]
    assert png not in tool_value(result)


def test_is_error_raises_with_the_servers_message():
    result = CallToolResult(content=[text("Unknown peak 'X'")], is_error=True)
    with pytest.raises(ToolError, match="Unknown peak 'X'"):
        tool_value(result)


def test_tool_outputs_and_models_unwrap():
    inner = CallToolResult(content=[], structured_content={"result": [1, 2]})
    assert tool_value(ToolOutput(content="x", tool_name="t", raw_input={}, raw_output=inner)) == [
        1,
        2,
    ]
    assert tool_value(Peak(name="K2", height=8611)) == {"name": "K2", "height": 8611}
    failed = ToolOutput(
        content="it broke", tool_name="t", raw_input={}, raw_output=None, is_error=True
    )
    with pytest.raises(ToolError, match="it broke"):
        tool_value(failed)


async def test_function_tools_returning_wrapped_values_pass_on_values():
    """What llama-index-tools-mcp's tools return (a CallToolResult) is a value too."""

    async def height(peak: str) -> CallToolResult:
        """Height of a peak, as an MCP client library returns it."""
        value = {"Everest": 8849, "K2": 8611}[peak]
        return CallToolResult(content=[text(str(value))], structured_content={"result": value})

    def info(peak: str) -> ToolOutput:
        """A ToolOutput holding a model."""
        model = Peak(name=peak, height=1)
        return ToolOutput(content="", tool_name="info", raw_input={}, raw_output=model)

    def subtract(a: int, b: int) -> int:
        """a - b."""
        return a - b

    plan = '1. height("Everest")\n2. height("K2")\n3. subtract($1, $2)\n4. info("K2")\n5. join()'
    wf = LLMCompilerWorkflow(tools=[height, subtract, info], llm=ScriptedLLM([plan, FINISH]))
    _, events = await run_and_collect(wf, user_msg="q")
    outputs = {e.task_id: e.output for e in events_of(events, TaskResult)}
    assert outputs == {1: 8849, 2: 8611, 3: 238, 4: {"name": "K2", "height": 1}}
    assert await call_tool(FunctionTool.from_defaults(fn=subtract), {"a": 3, "b": 1}) == 2


async def test_include_exclude_and_unknown_names():
    async with tools_from_mcp(PEAKS, include=["height", "subtract"]) as tools:
        assert sorted(t.metadata.name for t in tools) == ["height", "subtract"]
        assert tools[0].metadata.fn_schema is not None
    with pytest.raises(ConfigurationError, match="No MCP server has the tool\\(s\\) 'nope'"):
        await tools_from_mcp(PEAKS, include=["height", "nope"])


async def test_a_server_that_fails_to_start_says_why():
    argv = [sys.executable, "-c", "import sys; sys.exit('no server here')"]
    with pytest.raises(MCPServerError, match="failed to start.*no server here"):
        await tools_from_mcp(argv)
    with pytest.raises(MCPServerError, match="failed to start.*FileNotFoundError"):
        await tools_from_mcp("/nonexistent/mcp-server --stdio")


async def test_a_server_that_never_answers_times_out_and_is_ended(tmp_path):
    pidfile = tmp_path / "pid"
    script = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(300)"
    with pytest.raises(MCPServerError, match="did not answer within 5 s"):
        await tools_from_mcp([sys.executable, "-c", script, str(pidfile)], connect_timeout=5)
    with pytest.raises(ProcessLookupError):
        os.kill(int(pidfile.read_text()), 0)


async def test_closing_ends_the_stdio_server():
    async with tools_from_mcp(PEAKS, include=["pid"]) as tools:
        pid = await call_tool(tools[0], {})
        os.kill(pid, 0)  # alive while the session is open
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # ended and reaped


async def test_mcp_runs_make_no_blocking_calls_on_the_loop():
    plan = '1. height("Everest")\n2. height("K2")\n3. subtract($1, $2)\n4. join()'
    async with tools_from_mcp(PEAKS) as tools:
        script = [plan, FINISH, "1. crash()\n2. join()", FINISH, plan, FINISH]
        wf = LLMCompilerWorkflow(tools=tools, llm=ScriptedLLM(script), timeout=60)
        await run_and_collect(wf, user_msg="warm-up")
        await run_and_collect(wf, user_msg="crash")
        with blockbuster_ctx():
            # The crash ended the first session: this run starts a new server process.
            _, events = await asyncio.wait_for(run_and_collect(wf, user_msg="q"), 60)
        assert tools[0].connection.sessions_opened == 2
    outputs = {e.task_id: e.output for e in events_of(events, TaskResult)}
    assert outputs == {1: 8849, 2: 8611, 3: 238}
