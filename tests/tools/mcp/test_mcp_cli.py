"""``llm-compiler serve --mcp``: the served compiler's tools come from MCP servers."""

from __future__ import annotations

import os
import shlex

import pytest
from mcp_fixtures import PEAKS

from llm_compiler import TaskResult
from llm_compiler.cli import demo_workflows, main, parse, parser
from llm_compiler.models import resolve
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect

PLAN = '1. height("Everest")\n2. height("K2")\n3. subtract($1, $2)\n4. pid()\n5. join()'


def test_mcp_is_repeatable():
    args = parser().parse_args(["serve", "--mcp", "python -m a --x", "--mcp", "http://h/mcp"])
    assert args.mcp == ["python -m a --x", "http://h/mcp"]
    assert parse(["serve"], {}).mcp == []


def test_mcp_and_workflow_together_are_a_clear_error(capsys):
    assert main(["serve", "--mcp", "python -m a", "--workflow", "m:w"]) == 1
    assert "--mcp serves the compiler over MCP tools" in capsys.readouterr().err


async def test_the_served_compiler_uses_the_mcp_servers_tools(monkeypatch):
    llm = ScriptedLLM([PLAN, "Thought: ok\nAction: Finish(238 m)"])
    resolved = resolve.ResolvedLLM("api_base", "scripted", llm, None)
    monkeypatch.setattr(resolve, "resolve_llm", lambda: resolved)
    async with demo_workflows(mcp=[shlex.join(PEAKS)]) as (workflows, model):
        wf = workflows["compiler"]
        assert model == "scripted" and "height" in wf.tools
        out, events = await run_and_collect(wf, user_msg="How much higher is Everest than K2?")
    outputs = {e.task_id: e.output for e in events_of(events, TaskResult)}
    assert outputs[3] == 238 and str(out) == "238 m"
    with pytest.raises(ProcessLookupError):
        os.kill(outputs[4], 0)  # the server was closed with the served app


async def test_the_demo_tools_as_an_mcp_server(http_server):
    import sys

    from llm_compiler.tools import ToolError, call_tool, tools_from_mcp
    from llm_compiler.tools.policy import declared

    demo = [sys.executable, "-m", "llm_compiler.demo.mcp_server"]
    server = http_server(demo, env={**os.environ, "DEMO_TOOL_LATENCY": "0"})
    async with tools_from_mcp(server.url) as tools:
        by_name = {t.metadata.name: t for t in tools}
        assert sorted(by_name) == ["calculator", "lookup", "search"]
        # annotated read-only: run again after a crash, retried per policy
        assert {declared(t).side_effect for t in tools} == {"pure"}  # type: ignore[union-attr]
        assert await call_tool(by_name["lookup"], {"name": "K2", "field": "height_m"}) == 8611.0
        assert await call_tool(by_name["calculator"], {"expression": "8849 - 8611"}) == 238.0
        with pytest.raises(ToolError, match="No entry for 'Atlantis'"):
            await call_tool(by_name["lookup"], {"name": "Atlantis", "field": "height_m"})
