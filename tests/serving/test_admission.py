"""Every surface starts its runs through one admission: while the worker drains or its
store does not answer, each refuses a new run in its protocol (a 503 with Retry-After, an
OpenAI error, an A2A task rejected, an MCP tool error) and starts nothing."""

from __future__ import annotations

import sqlite3
import uuid

import httpx
import pytest
from a2a.client.client import ClientConfig
from a2a.client.client_factory import ClientFactory
from a2a.helpers import new_text_part
from a2a.types import Message, Role, SendMessageRequest, TaskState
from mcp import Client

from llm_compiler.serving import build_app

from .conftest import scripted, sse, start_server, stop, workflow

pytestmark = pytest.mark.timeout(90)

QUESTION = "alpha and beta?"


async def refusals(url: str) -> dict[str, tuple[int | str, str]]:
    """What each surface answers a new run with: (status or state, detail)."""
    out: dict[str, tuple[int | str, str]] = {}
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        for path in ("run", "run-nowait"):
            body = {"start_event": {"user_msg": QUESTION}}
            r = await c.post(f"/workflows/compiler/{path}", json=body)
            out[path] = (r.status_code, r.json()["detail"] + r.headers.get("retry-after", "-"))
        messages = [{"role": "user", "content": QUESTION}]
        for path, body in (
            ("chat/completions", {"model": "compiler", "messages": messages}),
            ("responses", {"model": "compiler", "input": QUESTION}),
        ):
            r = await c.post(f"/v1/{path}", json=body)
            out[path] = (r.status_code, r.json()["error"]["message"])
        card = (await c.get("/.well-known/agent-card.json")).json()
        assert card["supportedInterfaces"][0]["url"].endswith("/a2a")
    async with httpx.AsyncClient(timeout=30) as http:
        from a2a.client import A2ACardResolver

        card = await A2ACardResolver(httpx_client=http, base_url=url).get_agent_card()
        client = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
        message = Message(
            role=Role.ROLE_USER, parts=[new_text_part(QUESTION)], message_id=uuid.uuid4().hex
        )
        answers = [r async for r in client.send_message(SendMessageRequest(message=message))]
        task = [r.task for r in answers if r.HasField("task")][-1]
        note = "".join(p.text for p in task.status.message.parts)
        out["a2a"] = (TaskState.Name(task.status.state), note)
        await client.close()
    async with Client(f"{url}/mcp") as mcp:
        result = await mcp.call_tool("compiler", {"question": QUESTION})
        text = "".join(getattr(block, "text", "") for block in result.content)
        out["mcp"] = ("error" if result.is_error else "ok", text)
    return out


def check_refused(found: dict[str, tuple[int | str, str]], why: str) -> None:
    expected = {
        "run": 503,
        "run-nowait": 503,
        "chat/completions": 503,
        "responses": 503,
        "a2a": "TASK_STATE_REJECTED",
        "mcp": "error",
    }
    assert {k: v[0] for k, v in found.items()} == expected, found
    for surface, (_, detail) in found.items():
        assert why in detail and "nothing was started" in detail, (surface, detail)
    assert found["run"][1].endswith("5") and found["run-nowait"][1].endswith("5")  # Retry-After


@pytest.mark.parametrize("store", ["memory", "sqlite"])
async def test_every_surface_refuses_a_run_while_the_worker_drains(
    overlap, store, tmp_path, caplog
):
    from llm_compiler.durable import open_durable

    llm = scripted()
    durable = None if store == "memory" else await open_durable(f"sqlite:///{tmp_path / 'r.db'}")
    url, task, served = await start_server(
        lambda: build_app({"compiler": workflow(overlap, llm)}, durable=durable)
    )
    try:
        served.ops.draining = True
        found = await refusals(url)
    finally:
        served.ops.draining = False
        await stop(task)
    check_refused(found, "draining")
    assert llm.calls == []  # nothing started: no planner asked
    assert not [r for r in caplog.records if r.levelname == "ERROR"]  # a 503, not a failure
    if durable is not None:
        with sqlite3.connect(tmp_path / "r.db") as db:
            assert db.execute("SELECT count(*) FROM llmc_runs").fetchone() == (0,)


async def test_every_surface_refuses_a_run_while_the_store_does_not_answer(
    overlap, tmp_path, monkeypatch
):
    from llm_compiler.durable import open_durable
    from llm_compiler.durable.store import ServedDurable

    llm = scripted()
    durable = await open_durable(f"sqlite:///{tmp_path / 'r.db'}")
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap, llm)}, durable=durable)
    )
    try:
        # What a worker sees in an outage (its journal or lock connection lost).
        monkeypatch.setattr(ServedDurable, "degraded", property(lambda self: True))
        found = await refusals(url)
    finally:
        monkeypatch.undo()
        await stop(task)
    check_refused(found, "does not answer")
    assert llm.calls == []
    with sqlite3.connect(tmp_path / "r.db") as db:
        assert db.execute("SELECT count(*) FROM llmc_runs").fetchone() == (0,)


async def test_a_held_served_run_keeps_its_state_while_more_runs_than_kept_end(
    overlap, tmp_path, monkeypatch
):
    """A served run waits for a verdict while more runs end than the worker keeps
    finished states of: the verdict still reaches it, and the held call runs once."""
    from llm_compiler.durable import open_durable
    from llm_compiler.durable import runtime as durable_runtime_module

    from .test_verdicts import paying, verdict

    monkeypatch.setattr(durable_runtime_module, "STATES_KEPT", 4)  # (256 by default)
    durable = await open_durable(f"sqlite:///{tmp_path / 'r.db'}")
    url, task, _ = await start_server(
        lambda: build_app({"compiler": paying(overlap)}, durable=durable)
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=60) as c:
            body = {"start_event": {"user_msg": "pay?"}}
            held = (await c.post("/workflows/compiler/run-nowait", json=body)).json()
            request = (await sse(c, held["handler_id"], stop_at="TaskApprovalRequest"))[-1][1]
            for _ in range(durable_runtime_module.STATES_KEPT + 6):
                r = await c.post("/workflows/compiler/run", json=body)
                assert r.status_code == 200, r.text
            sent = verdict(held["run_id"], request["value"]["task_id"], action="approve")
            r = await c.post(f"/events/{held['handler_id']}", json=sent)
            assert r.status_code == 200, r.text
            events = await sse(c, held["handler_id"])
            handler = (await c.get(f"/handlers/{held['handler_id']}")).json()
    finally:
        await stop(task)
    assert handler["status"] == "completed", handler
    paid = [e for _, e in events if e["type"] == "TaskResult" and e["value"]["tool_name"] == "pay"]
    assert [e["value"]["output"] for e in paid] == ["paid 100 to value of alpha"], paid
