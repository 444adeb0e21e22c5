"""Verdicts count only when they can: a task not held now is refused with its state (409),
an edit that does not fit the tool's schema is refused with its fields (422) and the task
stays held, on ``POST /events`` and on AG-UI alike."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.serving import build_app

from .conftest import Overlap, scripted, sse, start_server, stop
from .test_task_approval import agui, agui_turn

pytestmark = pytest.mark.timeout(60)

PAY_PLAN = '1. fetch("alpha")\n2. fetch("beta")\n3. pay("$1", 100)\n4. join()<END_OF_PLAN>'


def pay(account: str, amount: int) -> str:
    """Pay an amount to an account."""
    return f"paid {amount} to {account}"


def paying(overlap: Overlap) -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(
        tools=[overlap.fetch, pay],
        llm=scripted([PAY_PLAN]),
        timeout=60,
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
    )


def verdict(run_id: str, task_id: int, **fields: object) -> dict:
    value = {"run_id": run_id, "round": 0, "task_id": task_id, **fields}
    return {"event": {"type": "TaskApprovalResponse", "value": value}}


async def test_verdicts_for_tasks_not_held_are_refused_with_their_state(overlap):
    overlap.release = asyncio.Event()  # the fetches run until the test lets them finish
    url, task, _ = await start_server(lambda: build_app({"compiler": paying(overlap)}))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            r = await c.post(
                "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": "pay?"}}
            )
            handler_id = r.json()["handler_id"]
            post = f"/events/{handler_id}"
            seen = []
            async with c.stream(
                "GET", f"/events/{handler_id}", params={"after_sequence": "-1"}
            ) as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        seen.append(json.loads(line[6:]))
                        ready = [e for e in seen if e["type"] == "TaskReady"]
                        complete = [e for e in seen if e["type"] == "PlanEvent"]
                        if len(ready) == 2 and any(e["value"]["complete"] for e in complete):
                            break
            run_id = ready[0]["value"]["run_id"]
            early = await c.post(post, json=verdict(run_id, 3))  # waits for its inputs
            running = await c.post(post, json=verdict(run_id, 1))  # runs, needs no approval
            overlap.release.set()
            held = await sse(c, handler_id, stop_at="TaskApprovalRequest")
            after = held[-1][0]
            typo = await c.post(
                post, json=verdict(run_id, 3, action="edit", args={"amount": "lots"})
            )
            unknown = await c.post(post, json=verdict(run_id, 3, action="edit", args={"sum": 5}))
            good = await c.post(post, json=verdict(run_id, 3, action="edit", args={"amount": 5}))
            rest = await sse(c, handler_id, after=str(after))
    finally:
        await stop(task)
    assert early.status_code == 409, early.text
    assert early.json()["state"] == "waiting for its inputs"
    assert "task 3" in early.json()["detail"].lower()
    assert running.status_code == 409 and running.json()["state"] == "running", running.text
    assert typo.status_code == 422, typo.text
    assert [e["field"] for e in typo.json()["errors"]] == ["amount"]
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "sum"
    assert good.status_code == 200, good.text  # still held after the refused edits
    results = {e["value"]["task_id"]: e["value"] for _, e in rest if e["type"] == "TaskResult"}
    assert results[3]["output"] == "paid 5 to value of alpha" and not results[3]["is_error"]


async def test_an_ag_ui_resume_with_a_bad_edit_is_refused_and_the_task_stays_held(overlap):
    url, task, _ = await start_server(lambda: build_app({"compiler": paying(overlap)}))
    turn = agui_turn("pay?")
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            first = await agui(c, turn)
            (interrupt,) = first[-1]["outcome"]["interrupts"]

            def resume(payload: dict) -> dict:
                entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": payload}
                return {**turn, "runId": "r2", "resume": [entry]}

            bad = await c.post(
                "/agui/compiler", json=resume({"action": "edit", "args": {"amount": "x"}})
            )
            rest = await agui(c, resume({"action": "approve"}))
    finally:
        await stop(task)
    assert bad.status_code == 422 and bad.json()["errors"][0]["field"] == "amount", bad.text
    results = [e["content"] for e in rest if e["type"] == "TOOL_CALL_RESULT"]
    assert results == ["paid 100 to value of alpha"]
