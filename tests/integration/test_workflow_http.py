"""The whole compiler workflow over HTTP: llama-index OpenAI clients against the fake server.

Planner and joiner requests are told apart by their ``stop`` sequences (only the planner's
contain ``<END_OF_PLAN>``). Ordering is proven with events, never with sleeps: a streamed
reply can be held (``Reply(hold_after=..., hold=...)``) until a tool releases it.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

from llm_compiler import (
    JoinEvent,
    LLMCallError,
    LLMCompilerWorkflow,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.engine.llm import COMPLETION_MAX_TOKENS
from llm_compiler.testing import events_of, run_and_collect

from .fake_openai import (
    CHAT_PATH,
    COMPLETIONS_PATH,
    FakeOpenAI,
    Reply,
    finish_text,
    plan_text,
    prompt_of,
    replan_text,
)

PLAN_STOP = ["<END_OF_PLAN>", "\nQuestion:"]
JOIN_STOP = ["<END_OF_RESPONSE>"]

HEIGHTS = {"Mount Everest": 8849, "K2": 8611}
QUESTION = "How much higher is Mount Everest than K2?"
PLAN = plan_text("height('Mount Everest')", "height('K2')", "subtract($1, $2)")
ANSWER = "Mount Everest is 238 m higher than K2."


async def height(mountain: str) -> int:
    """The height of a mountain in metres."""
    return HEIGHTS[mountain]


def subtract(a: int, b: int) -> int:
    """a minus b."""
    return a - b


def like_llm(fake: FakeOpenAI, *, chat: bool = True, **kwargs: Any) -> OpenAILike:
    """An ``OpenAILike`` client of the fake (no retries, 10 s timeout unless told)."""
    options = {"max_retries": 0, "timeout": 10.0, **kwargs}
    return OpenAILike(
        model="fake",
        api_base=fake.base_url,
        api_key="none",
        is_chat_model=chat,
        is_function_calling_model=False,
        context_window=8192,
        **options,
    )


def openai_llm(fake: FakeOpenAI, **kwargs: Any) -> OpenAI:
    """The stock ``OpenAI`` chat client pointed at the fake."""
    options = {"max_retries": 0, "timeout": 10.0, **kwargs}
    return OpenAI(model="gpt-4o-mini", api_base=fake.base_url, api_key="sk-test", **options)


def is_planner(body: dict[str, Any]) -> bool:
    return "<END_OF_PLAN>" in (body.get("stop") or [])


def phases(fake: FakeOpenAI) -> list[str]:
    """``planner`` / ``joiner`` for every recorded request, in order."""
    return ["planner" if is_planner(b) else "joiner" for b in fake.bodies]


def chunks_through(text: str, marker: str, size: int) -> int:
    """How many `size`-character deltas it takes to send `text` up to and including `marker`."""
    return -(-(text.index(marker) + len(marker)) // size)


# -------------------------------------------------------------------- request shapes


@pytest.mark.timeout(30)
@pytest.mark.parametrize("client", ["openai_like", "openai"])
async def test_chat_path_sends_streamed_requests_and_returns_the_answer(fake_openai, client):
    fake_openai.script(PLAN, finish_text(ANSWER))
    llm = like_llm(fake_openai) if client == "openai_like" else openai_llm(fake_openai)
    wf = LLMCompilerWorkflow(tools=[height, subtract], llm=llm, timeout=20)

    out, events = await run_and_collect(wf, user_msg=QUESTION)

    assert str(out) == ANSWER
    assert [r["path"] for r in fake_openai.requests] == [CHAT_PATH, CHAT_PATH]
    planner, joiner = fake_openai.bodies
    model = "fake" if client == "openai_like" else "gpt-4o-mini"
    for body in (planner, joiner):
        assert body["stream"] is True
        assert body["model"] == model
    assert planner["stop"] == PLAN_STOP
    assert joiner["stop"] == JOIN_STOP

    system, user = planner["messages"][0], planner["messages"][-1]
    assert system["role"] == "system"
    assert "height(mountain: str): The height of a mountain in metres." in system["content"]
    assert "subtract(a: int, b: int): a minus b." in system["content"]
    assert user == {"role": "user", "content": f"Question: {QUESTION}\n"}

    # Tool results reach the joiner as observations under their plan lines.
    joiner_user = joiner["messages"][-1]["content"]
    assert joiner_user.startswith(f"Question: {QUESTION}\n")
    for line in (
        "1. height('Mount Everest')\nObservation: 8849",
        "2. height('K2')\nObservation: 8611",
        "3. subtract($1, $2)\nObservation: 238",
    ):
        assert line in joiner_user
    results = {r.task_id: r.output for r in events_of(events, TaskResult)}
    assert results == {1: 8849, 2: 8611, 3: 238}
    assert events_of(events, TaskReady)[-1].args == {"a": 8849, "b": 8611}
    assert len(events_of(events, JoinEvent)) == 1


@pytest.mark.timeout(30)
async def test_completion_path_sends_one_prompt_per_call(fake_openai):
    # A completion model continues the joiner prompt after its trailing "Thought:".
    joiner_continuation = f" 8849 - 8611 = 238.\nAction: Finish({ANSWER})"
    fake_openai.script(PLAN, joiner_continuation)
    wf = LLMCompilerWorkflow(
        tools=[height, subtract], llm=like_llm(fake_openai, chat=False), timeout=20
    )

    out, events = await run_and_collect(wf, user_msg=QUESTION)

    assert str(out) == ANSWER
    assert [r["path"] for r in fake_openai.requests] == [COMPLETIONS_PATH, COMPLETIONS_PATH]
    planner, joiner = fake_openai.bodies
    for body in (planner, joiner):
        assert body["stream"] is True
        assert isinstance(body["prompt"], str)
        assert "messages" not in body
        # Completion endpoints default to 16 new tokens: the engine asks for enough.
        assert body["max_tokens"] == COMPLETION_MAX_TOKENS
    assert planner["stop"] == PLAN_STOP
    assert joiner["stop"] == JOIN_STOP
    assert planner["prompt"].endswith(f"\nQuestion: {QUESTION}\n")
    assert "height(mountain: str)" in planner["prompt"]
    assert joiner["prompt"].endswith(
        "3. subtract($1, $2)\nObservation: 238\n"
        "Answer the question: How much higher is Mount Everest than K2?\nThought:"
    )
    assert "1. height('Mount Everest')\nObservation: 8849" in joiner["prompt"]
    assert len(events_of(events, TaskResult)) == 3


# -------------------------------------------------------------------- streaming dispatch


@pytest.mark.timeout(30)
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
async def test_tasks_run_while_the_plan_still_streams(fake_openai, chat):
    """The planner's reply is held after line 1 until tool 1 runs: no early dispatch, no end."""
    release_plan = threading.Event()
    calls: list[str] = []

    async def release(token: str) -> str:
        """Lets the held plan go on."""
        calls.append(token)
        release_plan.set()  # thread-safe; the fake server's thread waits on it
        return "released"

    async def search(query: str) -> str:
        """Searches."""
        return f"found {query}"

    plan = plan_text("release('go')", "search('$1 and more')")
    held = Reply(
        text=plan,
        chunk_size=4,
        hold_after=chunks_through(plan, "release('go')", 4),
        hold=release_plan,
    )
    finish = finish_text("done") if chat else " ok\nAction: Finish(done)"
    fake_openai.script(held, finish)
    wf = LLMCompilerWorkflow(
        tools=[release, search], llm=like_llm(fake_openai, chat=chat), timeout=10
    )

    out, events = await run_and_collect(wf, user_msg="q")

    assert str(out) == "done"
    assert held.reached.is_set() and calls == ["go"]
    kinds = [
        ("ready", e.task_id)
        if isinstance(e, TaskReady)
        else ("plan", e.complete)
        if isinstance(e, PlanEvent)
        else None
        for e in events
    ]
    assert kinds.index(("ready", 1)) < kinds.index(("plan", True))
    assert events_of(events, TaskResult)[-1].output == "found released and more"


# -------------------------------------------------------------------- HTTP errors


@pytest.mark.timeout(30)
@pytest.mark.parametrize("status", [429, 500])
async def test_planner_http_errors_are_retried(fake_openai, status):
    fake_openai.fail_next(2, status=status)
    fake_openai.script(PLAN, finish_text(ANSWER))
    wf = LLMCompilerWorkflow(
        tools=[height, subtract], llm=like_llm(fake_openai, max_retries=2), timeout=20
    )

    started = time.monotonic()
    out, _ = await run_and_collect(wf, user_msg=QUESTION)

    assert str(out) == ANSWER
    assert phases(fake_openai) == ["planner"] * 3 + ["joiner"]
    assert fake_openai.bodies[0] == fake_openai.bodies[1] == fake_openai.bodies[2]
    assert time.monotonic() - started < 10  # the fake asks for 10 ms retry waits


@pytest.mark.timeout(30)
@pytest.mark.parametrize("status", [429, 500])
async def test_joiner_http_error_is_retried(fake_openai, status):
    fake_openai.script(PLAN, Reply(status=status), finish_text(ANSWER))
    wf = LLMCompilerWorkflow(
        tools=[height, subtract], llm=like_llm(fake_openai, max_retries=1), timeout=20
    )

    out, _ = await run_and_collect(wf, user_msg=QUESTION)

    assert str(out) == ANSWER
    assert phases(fake_openai) == ["planner", "joiner", "joiner"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("max_retries", [0, 1])
async def test_persistent_server_error_fails_the_planner_promptly(fake_openai, max_retries):
    fake_openai.fail_next(10, status=500)
    wf = LLMCompilerWorkflow(
        tools=[height, subtract],
        llm=like_llm(fake_openai, max_retries=max_retries),
        timeout=20,
    )

    started = time.monotonic()
    with pytest.raises(LLMCallError, match="The planner LLM call of round 0 failed") as info:
        await wf.run(user_msg=QUESTION)

    assert time.monotonic() - started < 10
    assert info.value.phase == "planner" and info.value.round == 0
    assert isinstance(info.value.cause, openai.InternalServerError)
    assert len(fake_openai.requests) == 1 + max_retries


# -------------------------------------------------------------------- broken streams


@pytest.mark.timeout(30)
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
async def test_plan_cut_mid_stream_fails_and_cancels_running_tools(fake_openai, chat):
    started, cancelled = threading.Event(), asyncio.Event()

    async def block(x: str) -> str:
        """Runs until cancelled."""
        started.set()  # lets the fake go on, and cut the plan
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    plan = plan_text("block('a')", "block('b')", "block('c')")
    at = chunks_through(plan, "block('a')", 4)
    # Held until tool 1 is running, then the connection drops.
    fake_openai.script(Reply(text=plan, chunk_size=4, hold_after=at, hold=started, cut_after=at))
    wf = LLMCompilerWorkflow(tools=[block], llm=like_llm(fake_openai, chat=chat), timeout=20)

    t0 = time.monotonic()
    with pytest.raises(LLMCallError, match="The planner LLM call of round 0 failed") as info:
        await wf.run(user_msg="q")

    assert time.monotonic() - t0 < 10
    assert info.value.phase == "planner"
    assert isinstance(info.value.cause, httpx.RemoteProtocolError)
    assert started.is_set()
    await asyncio.wait_for(cancelled.wait(), 5)
    assert len(fake_openai.requests) == 1


@pytest.mark.timeout(30)
async def test_joiner_cut_mid_stream_fails_the_joiner(fake_openai):
    answer = finish_text("a long answer that never arrives in full")
    fake_openai.script(PLAN, Reply(text=answer, chunk_size=5, cut_after=4))
    wf = LLMCompilerWorkflow(tools=[height, subtract], llm=like_llm(fake_openai), timeout=20)

    with pytest.raises(LLMCallError, match="The joiner LLM call of round 0 failed") as info:
        await wf.run(user_msg=QUESTION)

    assert info.value.phase == "joiner" and info.value.round == 0
    assert isinstance(info.value.cause, httpx.RemoteProtocolError)
    assert phases(fake_openai) == ["planner", "joiner"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("phase", "after_chunks", "cause"),
    [
        ("planner", None, openai.APITimeoutError),  # before the response headers
        ("planner", 3, httpx.ReadTimeout),  # in the middle of the plan
        ("joiner", 2, httpx.ReadTimeout),  # in the middle of the answer
    ],
)
async def test_stalled_server_times_out(fake_openai, phase, after_chunks, cause):
    if phase == "planner":
        fake_openai.stall_next(after_chunks)
    else:
        fake_openai.script(PLAN, Reply(text=finish_text(ANSWER), stall_after=after_chunks))
    wf = LLMCompilerWorkflow(
        tools=[height, subtract], llm=like_llm(fake_openai, timeout=0.5), timeout=20
    )

    started = time.monotonic()
    with pytest.raises(LLMCallError, match=f"The {phase} LLM call of round 0 failed") as info:
        await wf.run(user_msg=QUESTION)

    assert time.monotonic() - started < 10
    assert isinstance(info.value.cause, cause)


# -------------------------------------------------------------------- replanning


@pytest.mark.timeout(30)
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completion"])
async def test_replan_round_continues_the_plan(fake_openai, chat):
    def search(query: str) -> str:
        """Searches the web."""
        return {"capital of France": "Paris"}[query]

    def population(city: str) -> str:
        """The population of a city."""
        return {"Paris": "2.1 million"}[city]

    answer = "Paris, the capital, has 2.1 million inhabitants."
    fake_openai.script(
        plan_text("search('capital of France')"),
        replan_text("The population of the capital is missing."),
        "3. population($1)\n4. join()<END_OF_PLAN>",  # numbered on from round 0
        finish_text(answer),
    )
    wf = LLMCompilerWorkflow(
        tools=[search, population], llm=like_llm(fake_openai, chat=chat), timeout=20
    )

    out, events = await run_and_collect(
        wf, user_msg="How many people live in the capital of France?"
    )

    assert str(out) == answer
    assert out.raw["replans"] == 1
    assert phases(fake_openai) == ["planner", "joiner", "planner", "joiner"]
    assert [(e.round, e.reason) for e in events_of(events, ReplanEvent)] == [
        (1, "The population of the capital is missing.")
    ]
    assert [(e.round, e.task_id, e.args) for e in events_of(events, TaskReady)] == [
        (0, 1, {"query": "capital of France"}),
        (1, 3, {"city": "Paris"}),
    ]
    assert [r.output for r in events_of(events, TaskResult)] == ["Paris", "2.1 million"]

    replanner = prompt_of(fake_openai.bodies[2])
    assert "1. search('capital of France')\nObservation: Paris" in replanner
    assert "Replan: The population of the capital is missing." in replanner
    assert "Number its actions from 3" in replanner
    last_joiner = prompt_of(fake_openai.bodies[3])
    assert "Observation: Paris" in last_joiner
    assert "3. population($1)\nObservation: 2.1 million" in last_joiner


# -------------------------------------------------------------------- concurrency


@pytest.mark.timeout(60)
async def test_concurrent_runs_get_their_own_answers(fake_openai):
    n = 10
    arrived, all_arrived = 0, asyncio.Event()

    async def lookup(key: str) -> str:
        """Looks a key up; waits until every run's lookup is in flight."""
        nonlocal arrived
        arrived += 1
        if arrived == n:
            all_arrived.set()
        await all_arrived.wait()  # proves the runs overlap; deadlocks if they were serial
        return f"value of {key}"

    def respond(body: dict[str, Any]) -> str:
        prompt = prompt_of(body)
        question = re.findall(r"Question: (.*)", prompt)[-1]
        if is_planner(body):
            return plan_text(f"lookup('{question}')")
        (value,) = re.findall(r"Observation: value of (.*)", prompt)
        assert value == question, "a run saw another run's observation"
        return finish_text(f"answer to {value}")

    fake_openai.responder = respond
    wf = LLMCompilerWorkflow(tools=[lookup], llm=like_llm(fake_openai), timeout=30)
    questions = [f"question {i}" for i in range(n)]

    outputs = await asyncio.gather(*(wf.run(user_msg=q) for q in questions))

    assert [str(o) for o in outputs] == [f"answer to {q}" for q in questions]
    assert sorted(phases(fake_openai)) == ["joiner"] * n + ["planner"] * n


# -------------------------------------------------------------------- the fake's holds


@pytest.mark.timeout(30)
async def test_a_held_reply_goes_on_when_released_and_drops_on_close():
    go = threading.Event()
    released = Reply(text="abcdefgh", chunk_size=2, hold_after=2, hold=go)
    forever = Reply(text="never", hold_after=0, hold=threading.Event())
    with FakeOpenAI() as fake:
        fake.script(released, forever)
        llm = like_llm(fake, chat=False)

        stream = await llm.astream_complete("q")
        before = [(await anext(stream)).delta for _ in range(2)]
        assert await asyncio.to_thread(released.reached.wait, 5)
        go.set()
        after = [r.delta async for r in stream]
        assert before == ["ab", "cd"]
        assert "".join(after) == "efgh"

        held = await llm.astream_complete("q")  # requests on the first read
        reading = asyncio.ensure_future(anext(held))
        assert await asyncio.to_thread(forever.reached.wait, 5)
        fake.close()  # ends the hold by dropping the connection
        with pytest.raises(httpx.RemoteProtocolError):
            await reading
