"""The OpenAI client path (llama-index OpenAI / OpenAILike) against the scripted fake server."""

from __future__ import annotations

import time

import httpx
import openai
import pytest
from llama_index.core.llms import ChatMessage
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

from .fake_openai import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    FakeOpenAI,
    Reply,
    finish_text,
    plan_text,
    route,
)

PLAN = plan_text("search('Mount Everest')", "search('K2')", "calculator('$1 - $2')")


def completion_llm(fake: FakeOpenAI, **kwargs) -> OpenAILike:
    """A completion-style client, as used for the embedded local model."""
    options = {"max_retries": 0, "timeout": 5.0, "temperature": 0.0, **kwargs}
    return OpenAILike(
        model="gemma-3-270m",
        api_base=fake.base_url,
        api_key="none",
        is_chat_model=False,
        context_window=4096,
        **options,
    )


def chat_llm(fake: FakeOpenAI, **kwargs) -> OpenAI:
    """A chat client, as used with OPENAI_API_KEY."""
    options = {"max_retries": 0, "timeout": 5.0, **kwargs}
    return OpenAI(model="gpt-4o-mini", api_base=fake.base_url, api_key="sk-test", **options)


async def collect(gen) -> list[str]:
    return [r.delta async for r in gen]


async def test_streamed_completion_arrives_in_order(fake_openai):
    fake_openai.script(Reply(text=PLAN, chunk_size=2))
    llm = completion_llm(fake_openai)

    deltas = await collect(await llm.astream_complete("Question: how much higher?"))

    assert "".join(deltas) == PLAN
    assert len([d for d in deltas if d]) == -(-len(PLAN) // 2)
    body = fake_openai.last_body
    assert fake_openai.requests[-1]["path"] == COMPLETIONS_PATH
    assert body["stream"] is True
    assert body["model"] == "gemma-3-270m"
    assert body["prompt"] == "Question: how much higher?"


async def test_streamed_chat_deltas_arrive_in_order(fake_openai):
    fake_openai.script(Reply(text=PLAN, chunk_size=4))
    llm = chat_llm(fake_openai)

    gen = await llm.astream_chat([ChatMessage(role="user", content="plan please")])
    chunks = [c async for c in gen]

    assert "".join(c.delta or "" for c in chunks) == PLAN
    assert chunks[-1].message.content == PLAN  # accumulated text
    assert fake_openai.requests[-1]["path"] == CHAT_PATH
    assert fake_openai.last_body["messages"] == [{"role": "user", "content": "plan please"}]


async def test_stop_sequences_are_sent_and_honoured(fake_openai):
    fake_openai.script(PLAN + "\nQuestion: a made-up next example", "Hello world. END tail")
    completion, chat = completion_llm(fake_openai), chat_llm(fake_openai)

    text = "".join(await collect(await completion.astream_complete("q", stop=["<END_OF_PLAN>"])))
    reply = await chat.achat([ChatMessage(role="user", content="hi")], stop=["END"])

    assert text == PLAN.removesuffix("<END_OF_PLAN>")
    assert reply.message.content == "Hello world. "
    assert [b["stop"] for b in fake_openai.bodies] == [["<END_OF_PLAN>"], ["END"]]
    assert [b.get("stream", False) for b in fake_openai.bodies] == [True, False]


async def test_chat_on_a_completion_model_uses_the_completions_endpoint(fake_openai):
    fake_openai.script("Action: Finish(8611 m)")
    llm = completion_llm(fake_openai)

    gen = await llm.astream_chat([ChatMessage(role="user", content="How high is K2?")])
    text = "".join([c.delta async for c in gen])

    assert text == "Action: Finish(8611 m)"
    assert fake_openai.requests[-1]["path"] == COMPLETIONS_PATH
    assert "How high is K2?" in fake_openai.last_body["prompt"]


async def test_route_scripts_planner_and_joiner_by_prompt(fake_openai):
    fake_openai.responder = route(
        {"Plan the tools": [PLAN], "Observations": [finish_text("239 m")]}, fallback="?"
    )
    llm = completion_llm(fake_openai)

    plan = await llm.acomplete("Plan the tools for: Everest vs K2")
    answer = await llm.acomplete("Observations: 8849, 8611")
    other = await llm.acomplete("Plan the tools again")

    assert plan.text == PLAN
    assert answer.text == "Thought: I can answer now.\nAction: Finish(239 m)"
    assert other.text == "?"


@pytest.mark.parametrize("status", [429, 500])
@pytest.mark.parametrize("stream", [False, True])
async def test_http_errors_are_retried_then_succeed(fake_openai, status, stream):
    fake_openai.fail_next(2, status=status)
    fake_openai.script("recovered")
    llm = completion_llm(fake_openai, max_retries=2)

    started = time.monotonic()
    if stream:
        text = "".join(await collect(await llm.astream_complete("q")))
    else:
        text = (await llm.acomplete("q")).text

    assert text == "recovered"
    assert len(fake_openai.requests) == 3
    assert time.monotonic() - started < 3  # the fake sends `retry-after-ms: 10`


@pytest.mark.parametrize(
    ("status", "error"), [(429, openai.RateLimitError), (500, openai.InternalServerError)]
)
async def test_http_error_without_retries_raises(fake_openai, status, error):
    fake_openai.fail_next(1, status=status)
    llm = completion_llm(fake_openai, max_retries=0)

    with pytest.raises(error):
        await collect(await llm.astream_complete("q"))
    assert len(fake_openai.requests) == 1


@pytest.mark.timeout(10)
async def test_cut_stream_raises_instead_of_hanging(fake_openai):
    fake_openai.script(Reply(text=PLAN, chunk_size=5))
    fake_openai.cut_next(after_chunks=3)
    llm = completion_llm(fake_openai)

    deltas: list[str] = []
    with pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"):
        async for r in await llm.astream_complete("q"):
            deltas.append(r.delta)
    assert "".join(deltas) == PLAN[:15]


@pytest.mark.timeout(10)
async def test_stalled_server_times_out(fake_openai):
    fake_openai.stall_next()
    llm = completion_llm(fake_openai, timeout=0.5)

    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        await collect(await llm.astream_complete("q"))
    assert time.monotonic() - started < 3


@pytest.mark.timeout(10)
async def test_stall_in_the_middle_of_a_stream_times_out(fake_openai):
    fake_openai.script(Reply(text=PLAN, chunk_size=5))
    fake_openai.stall_next(after_chunks=2)
    llm = chat_llm(fake_openai, timeout=0.5)

    deltas: list[str] = []
    with pytest.raises(httpx.ReadTimeout):
        async for c in await llm.astream_chat([ChatMessage(role="user", content="q")]):
            deltas.append(c.delta or "")
    assert "".join(deltas) == PLAN[:10]
