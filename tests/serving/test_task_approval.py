"""One held task answered over ``POST /events``: the other tasks ran first, verdicts for
tasks not waiting are refused, the token and origin rules of plan approval apply, and
the edited arguments are the ones the tool gets."""

from __future__ import annotations

import json

import httpx
import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityPolicy

from .conftest import combine, scripted, sse, start_server, stop

pytestmark = pytest.mark.timeout(60)

TOKEN = "s3cret-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}
RUN = "/workflows/compiler/run-nowait"


async def test_a_held_task_is_approved_over_post_events(overlap):
    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, combine],
        llm=scripted(),
        timeout=60,
        tool_policies={"combine": ToolPolicy(requires_approval=True)},
    )
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(lambda: build_app({"compiler": wf}, policy=policy))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=AUTH) as c:
            r = await c.post(RUN, json={"start_event": {"user_msg": "alpha?"}})
            handler_id = r.json()["handler_id"]
            first = await sse(c, handler_id, stop_at="TaskApprovalRequest")
            kinds = [e["type"] for _, e in first]
            assert kinds.count("TaskResult") == 2  # both fetches ran while combine was held
            request = first[-1][1]["value"]
            assert request["task_id"] == 3 and request["policy"]["requires_approval"]
            run_id = request["run_id"]

            def verdict(**fields: object) -> dict:
                value = {"run_id": run_id, "round": 0, "task_id": 3, **fields}
                return {"event": {"type": "TaskApprovalResponse", "value": value}}

            post = f"/events/{handler_id}"
            for wrong in ({"task_id": 1}, {"task_id": 9}, {"round": 1}, {"run_id": "other"}):
                r = await c.post(post, json=verdict(**wrong))
                assert r.status_code == 409, (wrong, r.text)
            r = await c.post(post, json=verdict(), headers={"authorization": "Bearer nope"})
            assert r.status_code == 401
            r = await c.post(post, json=verdict(), headers={"origin": "http://evil.example"})
            assert r.status_code == 403
            edit = verdict(action="edit", args={"a": "edited"})
            assert (await c.post(post, json=edit)).status_code == 200
            rest = await sse(c, handler_id, after=str(first[-1][0]))
            again = await c.post(post, json=verdict(action="reject"))
    finally:
        await stop(task)
    results = {e["value"]["task_id"]: e["value"] for _, e in rest if e["type"] == "TaskResult"}
    assert results[3]["output"] == "edited + value of beta"
    assert again.status_code in (404, 409)  # answered before: refused


def agui_turn(question: str) -> dict:
    """An AG-UI ``RunAgentInput`` asking `question`."""
    return {
        "threadId": "t1",
        "runId": "r1",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": question}],
        "tools": [],
        "context": [],
        "forwardedProps": {},
    }


async def agui(c: httpx.AsyncClient, body: dict) -> list[dict]:
    async with c.stream("POST", "/agui/compiler", json=body) as r:
        assert r.status_code == 200, await r.aread()
        return [json.loads(line[6:]) async for line in r.aiter_lines() if line.startswith("data: ")]


async def test_a_held_task_is_an_ag_ui_interrupt_the_client_answers(overlap):
    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, combine],
        llm=scripted(),
        timeout=60,
        tool_policies={"combine": ToolPolicy(requires_approval=True, side_effect="pure")},
    )
    url, task, _ = await start_server(lambda: build_app({"compiler": wf}))
    turn = agui_turn("alpha and beta?")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            first = await agui(c, turn)
            finished = first[-1]
            assert finished["type"] == "RUN_FINISHED" and finished["outcome"]["type"] == "interrupt"
            (interrupt,) = finished["outcome"]["interrupts"]
            assert interrupt["id"].endswith(":0:3") and interrupt["reason"] == "tool_approval"
            assert interrupt["responseSchema"]["properties"]["action"]["enum"][0] == "approve"
            results = [e["content"] for e in first if e["type"] == "TOOL_CALL_RESULT"]
            assert sorted(results) == ["value of alpha", "value of beta"]  # ran meanwhile
            held = [e for e in first if e["type"] == "STATE_DELTA"]
            assert any(op.get("value") == "held" for e in held for op in e["delta"])
            wrong = {
                **turn,
                "runId": "r2",
                "resume": [{"interruptId": "x:0:3", "status": "resolved"}],
            }
            r = await c.post("/agui/compiler", json=wrong)
            assert r.status_code == 404
            entry = {
                "interruptId": interrupt["id"],
                "status": "resolved",
                "payload": {"action": "edit", "args": {"b": "B"}},
            }
            rest = await agui(c, {**turn, "runId": "r2", "resume": [entry]})
            again = await c.post("/agui/compiler", json={**turn, "runId": "r3", "resume": [entry]})
    finally:
        await stop(task)
    assert rest[0]["type"] == "RUN_STARTED" and rest[-1]["type"] == "RUN_FINISHED"
    results = [e["content"] for e in rest if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["value of alpha + B"]  # only what ran after the verdict
    assert again.status_code in (404, 409)
