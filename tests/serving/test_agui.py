"""The AG-UI endpoint: a compiler run as AG-UI events over SSE."""

from __future__ import annotations

import copy
import json

import httpx
from ag_ui.core import EventType

from .conftest import ANSWER

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
