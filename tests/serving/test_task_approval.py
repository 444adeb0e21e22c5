"""One held task answered over ``POST /events``: the other tasks ran first, verdicts for
tasks not waiting are refused, the token and origin rules of plan approval apply, and
the edited arguments are the ones the tool gets."""

from __future__ import annotations

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
