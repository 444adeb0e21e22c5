"""The AG-UI endpoint: a compiler run as AG-UI events over SSE."""

from __future__ import annotations

import asyncio
import copy
import json

import httpx
from ag_ui.core import EventType

from llm_compiler.serving import build_app, make_store

from .conftest import ANSWER, scripted, sse, start_server, stop, workflow

RUN_INPUT = {
    "threadId": "thread-1",
    "runId": "run-1",
    "state": {},
    "messages": [{"id": "m1", "role": "user", "content": "alpha and beta?"}],
    "tools": [],
    "context": [],
    "forwardedProps": {},
}


def apply_patch(doc: dict, ops: list[dict]) -> dict:
    """JSON Patch add/replace on objects and list appends (what the endpoint emits)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        *parents, last = op["path"].lstrip("/").split("/")
        target = doc
        for key in parents:
            target = target[key]
        if isinstance(target, list):
            assert last == "-" and op["op"] == "add"
            target.append(op["value"])
        else:
            assert op["op"] == "add" or last in target, op
            target[last] = op["value"]
    return doc


async def agui_events(base_url: str, body: dict) -> list[dict]:
    async with (
        httpx.AsyncClient(base_url=base_url, timeout=20) as c,
        c.stream("POST", "/agui/compiler", json=body) as r,
    ):
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        return [json.loads(line[6:]) async for line in r.aiter_lines() if line.startswith("data: ")]


async def test_a_run_is_tool_calls_state_and_an_answer(base_url):
    events = await agui_events(base_url, RUN_INPUT)
    kinds = [e["type"] for e in events]
    assert kinds[0] == EventType.RUN_STARTED and kinds[-1] == EventType.RUN_FINISHED
    assert events[0]["threadId"] == "thread-1" and events[0]["runId"] == "run-1"
    calls: dict[str, list[str]] = {}
    for e in events:
        if "toolCallId" in e:
            calls.setdefault(e["toolCallId"], []).append(e["type"])
    assert len(calls) == 3
    for sequence in calls.values():  # each task: start, args, end, then its result
        assert sequence == [
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
        ]
    args = [json.loads(e["delta"]) for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert {"a": "value of alpha", "b": "value of beta"} in args
    results = [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "value of alpha + value of beta" in results
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == ANSWER
    reasoning = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert reasoning.endswith(f"Finish({ANSWER})")
    # The DAG: a snapshot, then patches that apply cleanly to it.
    state = next(e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT")
    for e in events:
        if e["type"] == "STATE_DELTA":
            state = apply_patch(state, e["delta"])
    assert state["answer"] == ANSWER and state["question"] == "alpha and beta?"
    assert {k: (t["state"], t["deps"]) for k, t in state["tasks"].items()} == {
        "1": ("done", []),
        "2": ("done", []),
        "3": ("done", [1, 2]),
    }
    assert state["tasks"]["3"]["output"] == "value of alpha + value of beta"


async def test_a_question_is_required(base_url):
    body = {**RUN_INPUT, "messages": [{"id": "m1", "role": "user", "content": "  "}]}
    async with httpx.AsyncClient(base_url=base_url, timeout=20) as c:
        r = await c.post("/agui/compiler", json=body)
    assert r.status_code == 400 and "non-empty question" in r.json()["detail"]


HISTORY_INPUT = {
    **RUN_INPUT,
    "messages": [
        {"id": "m0", "role": "user", "content": "Remember the word zanzibar-42."},
        {"id": "a0", "role": "assistant", "content": "Noted: zanzibar-42."},
        {"id": "t0", "role": "tool", "content": "tool says quokka-7", "toolCallId": "c0"},
        {"id": "r0", "role": "reasoning", "content": "thinking about quokka-8"},
        {"id": "m1", "role": "user", "content": "alpha and beta?"},
    ],
}


async def test_a_run_goes_through_the_server_with_the_chat_history(overlap, tmp_path):
    """Listed in /handlers under the id the response names and kept in the store; the
    messages before the question are the run's chat history (the planner sees them)."""
    from llama_agents.server import HandlerQuery

    llm = scripted()
    spec = f"sqlite:///{tmp_path / 'runs.db'}"
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap, llm)}, store=make_store(spec))
    )
    try:
        async with (
            httpx.AsyncClient(base_url=url, timeout=20) as c,
            c.stream("POST", "/agui/compiler", json=HISTORY_INPUT) as r,
        ):
            assert r.status_code == 200
            handler_id = r.headers["x-handler-id"]
            lines = [line async for line in r.aiter_lines() if line.startswith("data: ")]
            handlers = (await c.get("/handlers")).json()["handlers"]
    finally:
        await stop(task)
    events = [json.loads(line[6:]) for line in lines]
    assert events[-1]["type"] == EventType.RUN_FINISHED
    custom = next(e for e in events if e["type"] == EventType.CUSTOM)
    assert custom["name"] == "handler" and custom["value"] == {"handler_id": handler_id}
    assert [(h["handler_id"], h["status"]) for h in handlers] == [(handler_id, "completed")]
    stored = await make_store(spec).query(HandlerQuery(handler_id_in=[handler_id]))
    assert [h.status for h in stored] == ["completed"]  # persisted, as any server run
    planner = llm.calls[0].prompt
    assert "zanzibar-42" in planner and "Noted: zanzibar-42." in planner
    assert "quokka" not in planner  # the front-end's tool results and reasoning are left out
    assert planner.count("alpha and beta?") >= 1


async def test_a_run_is_cancelled_through_the_server(overlap):
    """POST /handlers/{id}/cancel ends an AG-UI run with RUN_ERROR; a client that goes away
    cancels its run too."""
    overlap.release = asyncio.Event()  # the tools hold: the runs are mid-flight
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            async with c.stream("POST", "/agui/compiler", json=RUN_INPUT) as r:
                handler_id = r.headers["x-handler-id"]
                kinds = []
                async for line in r.aiter_lines():
                    if line.startswith("data: "):
                        kinds.append(json.loads(line[6:])["type"])
                        if kinds[-1] == EventType.TOOL_CALL_START and kinds.count(kinds[-1]) == 2:
                            cancel = await c.post(f"/handlers/{handler_id}/cancel", json={})
                            assert cancel.status_code == 200, cancel.text
            assert kinds[-1] == EventType.RUN_ERROR and EventType.RUN_FINISHED not in kinds
            async with c.stream("POST", "/agui/compiler", json=RUN_INPUT) as r:
                gone = r.headers["x-handler-id"]
                async for line in r.aiter_lines():
                    if "TOOL_CALL_START" in line:
                        break  # the client goes away mid-run
            stream = await sse(c, gone)
            statuses = {
                h["handler_id"]: h["status"] for h in (await c.get("/handlers")).json()["handlers"]
            }
    finally:
        await stop(task)
    assert stream[-1][1]["type"] == "WorkflowCancelledEvent"
    assert statuses == {handler_id: "cancelled", gone: "cancelled"}


async def test_a_failed_run_ends_with_run_error(overlap):
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    from .conftest import combine

    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, combine], llm=ScriptedLLM([RuntimeError("model down")]), timeout=30
    )
    url, task, _ = await start_server(lambda: build_app({"compiler": wf}))
    try:
        events = await agui_events(url, RUN_INPUT)
    finally:
        await stop(task)
    assert events[-1]["type"] == EventType.RUN_ERROR and "model down" in events[-1]["message"]
