"""The served workflows as MCP tools, with the official ``mcp`` client: one tool per
workflow, progress notifications, held approvals by elicitation (2026-07-28
``input_required`` and the older mid-call request) or by ``answer_approval``,
cancellation, and ``llama-index-tools-mcp``'s ``McpToolSpec`` inside a ``FunctionAgent``."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from mcp import Client
from mcp_types import ElicitResult

from llm_compiler import LLMCompilerWorkflow, ToolPolicy, _upstream
from llm_compiler.serving import build_app

from .conftest import ANSWER, scripted, sse, start_server, stop, workflow
from .test_verdicts import PAY_PLAN, pay

pytestmark = pytest.mark.timeout(60)


def paying(overlap) -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(
        tools=[overlap.fetch, pay],
        llm=scripted([PAY_PLAN]),
        timeout=60,
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
    )


@pytest.fixture
async def paying_url(overlap):
    url, task, _ = await start_server(lambda: build_app({"compiler": paying(overlap)}))
    yield url
    await stop(task)


def text(result) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_each_workflow_is_a_tool_reporting_progress(overlap):
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    notes: list[str] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    try:
        async with Client(f"{url}/mcp") as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            result = await c.call_tool(
                "compiler", {"question": "alpha and beta?"}, progress_callback=progress
            )
    finally:
        await stop(task)
    assert sorted(tools) == ["answer_approval", "await_run", "compiler"]
    assert "fetch" in tools["compiler"].description
    assert list(tools["compiler"].input_schema["properties"]) == ["question"]
    assert not result.is_error and text(result) == ANSWER
    assert "[task 3 combine done: value of alpha + value of beta]" in notes
    assert notes.index("[task 3 combine started]") > notes.index(
        "[task 1 fetch done: value of alpha]"
    )


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_held_call_is_answered_by_elicitation(paying_url, mode):
    asked: list[str] = []

    async def elicit(context, params) -> ElicitResult:
        asked.append(params.message)
        if len(asked) == 1:  # a typo: refused, asked again with the reason
            return ElicitResult(
                action="accept", content={"action": "edit", "args": '{"amount": "x"}'}
            )
        return ElicitResult(action="accept", content={"action": "edit", "args": '{"amount": 5}'})

    async with Client(f"{paying_url}/mcp", elicitation_callback=elicit, mode=mode) as c:
        result = await c.call_tool("compiler", {"question": "pay alpha"})
    assert not result.is_error and text(result) == ANSWER, text(result)
    assert len(asked) == 2
    assert "task 3: pay(account='value of alpha', amount=100)" in asked[0]
    assert "amount" in asked[1] and "stays held" in asked[1]


async def test_without_elicitation_the_result_names_the_held_call(paying_url):
    async with Client(f"{paying_url}/mcp") as c:
        held = await c.call_tool("compiler", {"question": "pay alpha"})
        message = text(held)
        approval_id = message.split("approval id ")[1].split()[0].rstrip(",")
        bad = await c.call_tool(
            "answer_approval", {"approval_id": approval_id, "action": "edit", "args": {"x": 1}}
        )
        done = await c.call_tool(
            "answer_approval", {"approval_id": approval_id, "action": "reject"}
        )
    assert not held.is_error and "has not finished" in message and "answer_approval" in message
    assert held.structured_content["status"] == "held"
    assert held.structured_content["approvals"][0]["approval_id"] == approval_id
    assert bad.is_error and "not an argument of this tool" in text(bad)
    assert not done.is_error and text(done) == ANSWER
    assert "rejected" not in message


async def test_cancelling_the_call_cancels_the_run(overlap):
    overlap.release = asyncio.Event()  # the fetches run until the run is cancelled
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    started = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        if "started" in (message or ""):
            started.set()

    try:
        async with Client(f"{url}/mcp") as c:
            call = asyncio.create_task(
                c.call_tool("compiler", {"question": "x?"}, progress_callback=progress)
            )
            await asyncio.wait_for(started.wait(), 20)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            async with httpx.AsyncClient(base_url=url, timeout=20) as h:
                (handler,) = (await h.get("/handlers")).json()["handlers"]
                events = await sse(h, handler["handler_id"])
    finally:
        await stop(task)
    assert events[-1][1]["type"] == "WorkflowCancelledEvent"


async def test_a_llamaindex_agent_calls_the_compiler_through_mcp_tool_spec(overlap):
    pytest.importorskip("llama_index.tools.mcp")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
    from llama_index.core.llms.mock import MockFunctionCallingLLM
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    def script(messages, **kwargs) -> ChatMessage:
        """The agent's model: ask the compiler, then answer with what it said."""
        results = [m for m in messages if m.role == MessageRole.TOOL]
        if results:
            return ChatMessage(
                role="assistant", content=f"The compiler says: {results[-1].content}"
            )
        call = ToolCallBlock(
            tool_call_id="c1", tool_name="compiler", tool_kwargs={"question": "alpha and beta?"}
        )
        return ChatMessage(role="assistant", blocks=[call])

    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        # The client is closed here (BasicMCPClient never closes one it makes itself).
        async with _upstream.mcp_http_client()() as http:
            mcp = BasicMCPClient(f"{url}/mcp", http_client=http)
            spec = McpToolSpec(client=mcp, allowed_tools=["compiler"])
            tools = await spec.to_tool_list_async()
            llm = MockFunctionCallingLLM(response_generator=script)
            reply = await FunctionAgent(tools=tools, llm=llm).run("What are alpha and beta?")
    finally:
        await stop(task)
    assert [t.metadata.name for t in tools] == ["compiler"]
    assert str(reply).startswith("The compiler says: ") and ANSWER in str(reply), str(reply)
