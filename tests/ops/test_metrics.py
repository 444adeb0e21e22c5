"""``serve --metrics``: after a run, ``/metrics`` (Prometheus text, behind the token) holds
the run's outcome, each task's duration by tool and side-effect class, the retry, the held
approval and its wait, the model calls with their tokens and cost as the run's summary
counts them, the store's commits and its outage state."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.durable import open_durable
from llm_compiler.serving import SecurityPolicy, build_app
from llm_compiler.testing import ScriptedLLM, by_role
from llm_compiler.tracing.metrics import stop_metrics
from tests.serving.conftest import sse, start_server, stop

from .conftest import TOKEN

pytestmark = pytest.mark.timeout(60)
AUTH = {"authorization": f"Bearer {TOKEN}"}
PLAN = '1. fetch("a")\n2. flaky("b")\n3. pay(1)\n4. join()<END_OF_PLAN>'
PRICE = {"scripted": {"input": 2.0, "output": 8.0}}


class Tools:
    def __init__(self) -> None:
        self.tries = 0

    async def fetch(self, name: str) -> str:
        """Fetch a value."""
        return f"value of {name}"

    async def flaky(self, name: str) -> str:
        """Fails once, then answers."""
        self.tries += 1
        if self.tries == 1:
            raise ConnectionError("once")
        return f"flaky {name}"

    def pay(self, amount: int) -> str:
        """Pay."""
        return f"paid {amount}"


def samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def value(found: dict, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    want = set(labels.items())
    hits = [v for (n, ls), v in found.items() if n == name and want <= set(ls)]
    assert hits, (name, labels, sorted({n for n, _ in found}))
    return sum(hits)


async def test_metrics_after_a_run_are_right(tmp_path):
    tools = Tools()
    wf = LLMCompilerWorkflow(
        tools=[tools.fetch, tools.flaky, tools.pay],
        llm=ScriptedLLM(by_role(PLAN, "Thought: done.\nAction: Finish(all done)")),
        prices=PRICE,
        tool_policies={
            "fetch": ToolPolicy(side_effect="pure"),
            "flaky": ToolPolicy(side_effect="idempotent", retry={"attempts": 2}),
            "pay": ToolPolicy(requires_approval=True),
        },
        timeout=30,
    )
    durable = await open_durable(f"sqlite:///{tmp_path / 'runs.db'}")

    def app():
        served = build_app({"compiler": wf}, durable=durable, policy=SecurityPolicy.build(TOKEN))
        served.ops.serve_metrics()
        return served

    url, task, served = await start_server(app)
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20, headers=AUTH) as c:
            assert (await c.get("/metrics", headers={"authorization": ""})).status_code == 401
            r = await c.post(
                "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": "go?"}}
            )
            handler_id = r.json()["handler_id"]
            first = await sse(c, handler_id, stop_at="TaskApprovalRequest")
            request = first[-1][1]["value"]
            held = samples((await c.get("/metrics")).text)
            assert value(held, "llm_compiler_approvals_pending") == 1
            assert value(held, "llm_compiler_runs_active") == 1
            await asyncio.sleep(0.2)  # a wait the histogram must show
            verdict = {k: request[k] for k in ("run_id", "round", "task_id")}
            body = {"event": {"type": "TaskApprovalResponse", "value": verdict}}
            assert (await c.post(f"/events/{handler_id}", json=body)).status_code == 200
            await sse(c, handler_id, after=str(first[-1][0]))
            handler = (await c.get(f"/handlers/{handler_id}")).json()
            r = await c.get("/metrics")
            assert r.headers["content-type"].startswith("text/plain")
            found = samples(r.text)
    finally:
        await stop(task)
        stop_metrics()
    usage = handler["result"]["value"]["result"]["summary"]["usage"]
    assert value(found, "llm_compiler_runs_total", llm_compiler_run_outcome="completed") == 1
    assert value(found, "llm_compiler_runs_active") == 0
    assert value(found, "llm_compiler_approvals_pending") == 0
    duration = "llm_compiler_task_duration_seconds_count"
    assert value(found, duration, gen_ai_tool_name="fetch", llm_compiler_tool_side_effect="pure")
    assert value(found, duration, gen_ai_tool_name="flaky", llm_compiler_task_status="done") == 1
    assert value(found, duration, llm_compiler_tool_side_effect="at_most_once") == 1  # pay
    assert value(found, "llm_compiler_task_retries_total", gen_ai_tool_name="flaky") == 1
    assert value(found, "llm_compiler_approvals_total", gen_ai_tool_name="pay") == 1
    wait = "llm_compiler_approval_wait_seconds"
    assert value(found, wait + "_count", llm_compiler_approval_action="approve") == 1
    assert value(found, wait + "_sum") >= 0.2
    calls = "gen_ai_client_operation_duration_seconds_count"
    assert value(found, calls, llm_compiler_phase="planner") == 1
    assert value(found, calls, llm_compiler_phase="joiner") == 1
    assert value(found, calls) == usage["calls"] == 2
    tokens = "gen_ai_client_token_usage_sum"
    assert value(found, tokens, gen_ai_token_type="input") == usage["prompt_tokens"] > 0
    assert value(found, tokens, gen_ai_token_type="output") == usage["completion_tokens"] > 0
    assert value(found, "llm_compiler_llm_cost_USD_total") == pytest.approx(usage["cost"])
    assert value(found, "llm_compiler_store_commit_duration_seconds_count") > 0
    assert value(found, "llm_compiler_store_outage") == 0
    assert value(found, "llm_compiler_runs_queued") == 0
