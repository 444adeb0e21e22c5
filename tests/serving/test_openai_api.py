"""The OpenAI-compatible routes with the official ``openai`` client: chat completions and
responses, streamed and not, the model naming the workflow, no tool calls for a client to
run, and a held approval that ends the response and is answered by the next request."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import openai.resources  # loaded here, not lazily inside a test (while threads import too)
import pytest
from openai import AsyncOpenAI

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityPolicy

from .conftest import ANSWER, combine, scripted, sse, start_server, stop, workflow
from .test_verdicts import PAY_PLAN, pay

pytestmark = pytest.mark.timeout(60)

TOKEN = "s3cret-token-0123456789"
OTHER = "Thought: done.\nAction: Finish(the other workflow answered)"


@pytest.fixture
async def served(overlap):
    """(url, task): `compiler` and `other` (its joiner answers OTHER), with a token."""
    workflows = {
        "compiler": workflow(overlap),
        "other": LLMCompilerWorkflow(
            tools=[overlap.fetch, combine], llm=scripted(answers=[OTHER]), timeout=60
        ),
    }
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(lambda: build_app(workflows, policy=policy))
    yield url
    await stop(task)


def client(url: str) -> AsyncOpenAI:
    # The server's token is the client's API key; no retries (a retry would run again).
    return AsyncOpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0)


async def test_chat_completions_answer_with_the_run_and_no_tool_calls(served):
    async with client(served) as c:
        await chat_completions(c)


async def chat_completions(c: AsyncOpenAI) -> None:
    models = [m.id async for m in c.models.list()]
    assert models == ["compiler", "other"]
    question = [{"role": "user", "content": "alpha and beta?"}]
    done = await c.chat.completions.create(model="compiler", messages=question)
    message = done.choices[0].message
    assert message.content == ANSWER and not message.tool_calls and not message.function_call
    reasoning = message.model_extra["reasoning_content"]
    assert "[task 1 fetch done: value of alpha]" in reasoning
    assert "[task 3 combine done: value of alpha + value of beta]" in reasoning
    assert done.usage.prompt_tokens > 0 and done.usage.completion_tokens > 0
    other = await c.chat.completions.create(model="other", messages=question)
    assert other.choices[0].message.content == "the other workflow answered"

    chunks = [
        chunk
        async for chunk in await c.chat.completions.create(
            model="compiler", messages=question, stream=True
        )
    ]
    deltas = [ch.choices[0].delta for ch in chunks]
    assert all(not d.tool_calls and not d.function_call for d in deltas)
    assert "".join(d.content or "" for d in deltas) == ANSWER
    thinking = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert thinking.index("1. fetch(") < thinking.index("[task 1 fetch done")
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert chunks[-1].model_extra["llm_compiler"]["handler_id"]


async def test_responses_stream_with_sequence_numbers(served):
    async with client(served) as c:
        await responses(c)


async def responses(c: AsyncOpenAI) -> None:
    done = await c.responses.create(model="compiler", input="alpha and beta?")
    assert done.status == "completed" and done.output_text == ANSWER
    assert [item.type for item in done.output] == ["reasoning", "message"]
    assert "[task 2 fetch done: value of beta]" in done.output[0].content[0].text

    events = [e async for e in await c.responses.create(model="other", input="x?", stream=True)]
    numbers = [e.sequence_number for e in events]
    assert numbers == list(range(len(events)))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.reasoning_text.delta" in kinds and "response.output_text.delta" in kinds
    assert not any("function_call" in k for k in kinds)
    final = events[-1].response
    assert final.output_text == "the other workflow answered"
    assert all(item.type in ("reasoning", "message") for item in final.output)


async def test_bad_requests_are_refused_with_openai_errors(served):
    async with client(served) as c:
        await refusals(c, served)


async def refusals(c: AsyncOpenAI, served: str) -> None:
    with pytest.raises(openai.NotFoundError, match="No model 'gpt-4o'"):
        await c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="non-empty question"):
        await c.chat.completions.create(
            model="compiler", messages=[{"role": "user", "content": " "}]
        )
    with pytest.raises(openai.BadRequestError, match="messages"):
        await c.chat.completions.create(model="compiler", messages=[])
    async with AsyncOpenAI(base_url=f"{served}/v1", api_key="wrong", max_retries=0) as wrong:
        with pytest.raises(openai.AuthenticationError):
            await wrong.models.list()


async def test_a_held_approval_ends_the_response_and_the_next_request_answers_it(overlap):
    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, pay],
        llm=scripted([PAY_PLAN]),
        timeout=60,
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
    )
    url, task, _ = await start_server(lambda: build_app({"compiler": wf}))
    c = AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    question = [{"role": "user", "content": "pay alpha"}]
    try:
        await answer_held(c, question)
    finally:
        await c.close()
        await stop(task)


async def answer_held(c: AsyncOpenAI, question: list) -> None:
    held = await c.chat.completions.create(model="compiler", messages=question)
    (approval,) = held.model_extra["llm_compiler"]["approvals"]
    assert approval["tool"] == "pay" and approval["args"] == {
        "account": "value of alpha",
        "amount": 100,
    }
    text = held.choices[0].message.content
    assert "waits for approval" in text and approval["approval_id"] in text
    # both fetches ran while pay was held
    assert held.choices[0].message.model_extra["reasoning_content"].count("fetch done") == 2

    def answer(**verdict: object) -> dict:
        return {"approvals": [{"approval_id": approval["approval_id"], **verdict}]}

    with pytest.raises(openai.UnprocessableEntityError, match="amount"):
        await c.chat.completions.create(
            model="compiler",
            messages=question,
            extra_body=answer(action="edit", args={"amount": "lots"}),
        )
    events = [
        e
        async for e in await c.responses.create(
            model="compiler",
            input="pay alpha",
            stream=True,
            extra_body=answer(action="edit", args={"amount": 5}),
        )
    ]
    with pytest.raises(openai.ConflictError, match="done"):  # answered: refused
        await c.chat.completions.create(model="compiler", messages=question, extra_body=answer())
    final = events[-1].response
    assert final.output_text == ANSWER
    assert "[task 3 pay done: paid 5 to value of alpha]" in final.output[0].content[0].text
    assert [e.sequence_number for e in events] == list(range(len(events)))


async def test_closing_a_stream_cancels_its_run(overlap):
    overlap.release = asyncio.Event()  # the fetches run until the run is cancelled
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as h:
            body = {"model": "compiler", "messages": [{"role": "user", "content": "x?"}]}
            async with h.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as r:
                handler_id = r.headers["x-handler-id"]
                async for line in r.aiter_lines():
                    if "[task" in line or "fetch(" in line:
                        break
            events = await sse(h, handler_id)  # to the run's end
            status = (await h.get(f"/handlers/{handler_id}")).json()["status"]
    finally:
        await stop(task)
    assert events[-1][1]["type"] == "WorkflowCancelledEvent"
    assert status == "cancelled"


async def test_a_response_held_for_approval_is_incomplete_with_the_held_call(overlap):
    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, pay],
        llm=scripted([PAY_PLAN]),
        timeout=60,
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
    )
    url, task, _ = await start_server(lambda: build_app({"compiler": wf}))
    c = AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
    try:
        held = await c.responses.create(model="compiler", input="pay alpha")
    finally:
        await c.close()
        await stop(task)
    assert held.status == "incomplete"
    (call,) = [item for item in held.output if item.type == "mcp_approval_request"]
    assert call.name == "pay" and json.loads(call.arguments)["amount"] == 100
    assert call.id in held.output_text and call.id == held.metadata["approval_ids"]
