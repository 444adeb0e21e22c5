"""An MCP connection's lifetime: reference-counted opens, and a closed state that stays closed.

Each test counts the server processes started (``PEAKS_STARTS``): using a closed connection
must be a clear error that starts none.
"""

from __future__ import annotations

import os

import pytest
from mcp_fixtures import PEAKS

from llm_compiler import LLMCompilerWorkflow, MCPConnection, MCPServerError, TaskResult
from llm_compiler.testing import ScriptedLLM, run_and_collect
from llm_compiler.tools import tools_from_mcp

pytestmark = pytest.mark.timeout(90)
CLOSED = "is closed .*make a new connection"


@pytest.fixture
def starts(tmp_path):
    """The file each started server appends its pid to, and the env that asks for it."""
    return tmp_path / "starts"


def started(path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_a_tool_called_after_async_with_is_a_clear_error_and_starts_no_server(starts):
    async with tools_from_mcp(PEAKS, env={"PEAKS_STARTS": str(starts)}) as tools:
        connection = tools[0].connection
        assert await connection.call_tool("height", {"peak": "K2"})
    [pid] = started(starts)
    assert connection.closed and gone(pid)
    with pytest.raises(MCPServerError, match=CLOSED):
        await connection.call_tool("height", {"peak": "K2"})
    with pytest.raises(MCPServerError, match=CLOSED):
        await connection.list_tools()
    with pytest.raises(MCPServerError, match=CLOSED):
        await connection.open()
    assert started(starts) == [pid] and connection.sessions_opened == 1


async def test_a_run_after_aclose_gets_an_error_observation_and_no_server(starts):
    tools = await tools_from_mcp(PEAKS, include=["height"], env={"PEAKS_STARTS": str(starts)})
    await tools.aclose()
    plan = '1. height("K2")\n2. join()'
    llm = ScriptedLLM([plan, "Thought: no.\nAction: Finish(none)"])
    _, events = await run_and_collect(
        LLMCompilerWorkflow(tools=tools, llm=llm, timeout=30), user_msg="q"
    )
    [result] = [e for e in events if isinstance(e, TaskResult)]
    assert result.is_error and "MCPServerError" in result.output and "is closed" in result.output
    assert len(started(starts)) == 1


async def test_the_last_of_several_users_closes_the_connection(starts):
    connection = MCPConnection(PEAKS, env={"PEAKS_STARTS": str(starts)})
    async with connection:
        async with tools_from_mcp(connection, include=["pid"]) as tools:
            pid = (await tools[0].acall()).raw_output
        # The loader gave its reference back; ours keeps the same session open.
        assert not connection.closed and not gone(pid)
        assert await connection.call_tool("height", {"peak": "K2"})
        await connection.open()  # a second reference of our own
        await connection.aclose()
        assert not connection.closed
    assert connection.closed and gone(pid)
    assert started(starts) == [pid] and connection.sessions_opened == 1
    await connection.aclose()  # closing again does nothing


async def test_a_connection_that_was_never_opened_starts_nothing(starts):
    connection = MCPConnection(PEAKS, env={"PEAKS_STARTS": str(starts)})
    with pytest.raises(MCPServerError, match="is not open: use `async with`"):
        await connection.call_tool("height", {"peak": "K2"})
    await connection.aclose()
    with pytest.raises(MCPServerError, match=CLOSED):
        await connection.open()
    assert started(starts) == []


async def test_a_failed_open_gives_its_reference_back_and_may_be_retried(tmp_path, starts):
    flag = tmp_path / "broken"
    flag.touch()
    env = {"PEAKS_BROKEN_FLAG": str(flag), "PEAKS_STARTS": str(starts)}
    connection = MCPConnection(PEAKS, env=env)
    with pytest.raises(MCPServerError, match="failed to start.*refusing to start"):
        await connection.open()
    assert not connection.closed
    flag.unlink()
    async with connection:
        assert await connection.call_tool("height", {"peak": "K2"})
    assert connection.closed and len(started(starts)) == 2
