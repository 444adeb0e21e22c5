"""The HTTP server on 127.0.0.1 with a scripted model and overlapping tools."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from llm_compiler.serving import build_app, make_store

from .conftest import ANSWER, Overlap, scripted, sse, start_run, start_server, stop, workflow

pytestmark = pytest.mark.timeout(60)


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=20)


def types(events: list[tuple[int, dict]]) -> list[str]:
    return [e["type"] for _, e in events]


def answer_of(envelope: dict) -> str:
    blocks = envelope["value"]["result"]["response"]["blocks"]
    return "".join(b["text"] for b in blocks)


async def test_page_and_info_are_served_offline(base_url):
    async with client(base_url) as c:
        page = await c.get("/")
        assert page.status_code == 200 and "/static/app.js" in page.text
        assert "http" not in page.text.replace("http-equiv", "")  # nothing from a CDN
        script = await c.get("/static/app.js")
        assert script.status_code == 200 and "after_sequence=-1" in script.text
        info = (await c.get("/api/info")).json()
        assert info["workflows"] == ["compiler"] and info["default"] == "compiler"


async def test_a_run_streams_every_event_in_order(base_url):
    async with client(base_url) as c:
        handler_id = await start_run(c)
        events = await sse(c, handler_id)
    ids = [seq for seq, _ in events]
    assert ids == sorted(set(ids))
    kinds = types(events)
    assert kinds[-1] == "StopEvent" and answer_of(events[-1][1]) == ANSWER
    values = [e["value"] for _, e in events]
    ready = [v["task_id"] for v, k in zip(values, kinds, strict=True) if k == "TaskReady"]
    done = {v["task_id"]: v for v, k in zip(values, kinds, strict=True) if k == "TaskResult"}
    assert sorted(ready) == [1, 2, 3] and sorted(done) == [1, 2, 3]
    for task_id in ready:  # each task: planned, then ready, then its result
        plan_at = next(
            i
            for i, v in enumerate(values)
            if kinds[i] == "PlanEvent" and any(t["id"] == task_id for t in v["tasks"])
        )
        ready_at = next(
            i for i, v in enumerate(values) if kinds[i] == "TaskReady" and v["task_id"] == task_id
        )
        result_at = next(
            i for i, v in enumerate(values) if kinds[i] == "TaskResult" and v["task_id"] == task_id
        )
        assert plan_at < ready_at < result_at < kinds.index("JoinEvent")
    # The two fetches overlapped in time; combine got both resolved values.
    assert (
        done[1]["started_at"] < done[2]["finished_at"]
        and done[2]["started_at"] < done[1]["finished_at"]
    )
    assert done[3]["output"] == "value of alpha + value of beta"
    tokens = [v for v, k in zip(values, kinds, strict=True) if k == "CompilerStream"]
    assert {t["phase"] for t in tokens} == {"plan", "join"} and all(
        "response" not in t for t in tokens
    )
    assert "".join(t["delta"] for t in tokens if t["phase"] == "join").endswith(f"Finish({ANSWER})")


async def test_one_run_has_one_id_over_http(base_url):
    async with client(base_url) as c:
        r = await c.post(
            "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": "alpha and beta?"}}
        )
        started = r.json()
        events = await sse(c, started["handler_id"])
        handler = (await c.get(f"/handlers/{started['handler_id']}")).json()
    ids = {e["value"]["run_id"] for _, e in events if "run_id" in e["value"]}
    assert ids == {started["run_id"]} == {handler["run_id"]}


async def test_the_blocking_run_endpoint_returns_the_answer(base_url):
    async with client(base_url) as c:
        r = await c.post("/workflows/compiler/run", json={"start_event": {"user_msg": "q?"}})
    assert r.status_code == 200, r.text
    assert (
        "".join(b["text"] for b in r.json()["result"]["value"]["result"]["response"]["blocks"])
        == ANSWER
    )


async def test_reconnecting_with_last_event_id_resumes_without_gaps(base_url):
    async with client(base_url) as c:
        handler_id = await start_run(c)
        first = await sse(c, handler_id, limit=4)
        last_id = first[-1][0]
        rest = await sse(c, handler_id, after="now", headers={"Last-Event-ID": str(last_id)})
        full = await sse(c, handler_id)
    assert [s for s, _ in first + rest] == [s for s, _ in full]
    assert types(rest)[-1] == "StopEvent"


async def test_cancel_stops_a_running_run(overlap):
    overlap.release = asyncio.Event()  # the tools never finish on their own
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        async with client(url) as c:
            handler_id = await start_run(c)
            seen: list[str] = []
            async with c.stream("GET", f"/events/{handler_id}", params={"after_sequence": -1}) as r:
                async for line in r.aiter_lines():
                    if line.startswith("data: ") and '"type":"TaskReady"' in line:
                        seen.append(line)
                    if len(seen) == 2:
                        break
            r = await c.post(f"/handlers/{handler_id}/cancel", json={})
            assert r.status_code == 200, r.text
            handler = (await c.get(f"/handlers/{handler_id}")).json()
            assert handler["status"] == "cancelled"
            runs = (await c.get("/api/runs")).json()["runs"]
            assert runs[0]["handler_id"] == handler_id and runs[0]["status"] == "cancelled"
    finally:
        await stop(task)


async def test_ten_concurrent_runs_all_finish(base_url, overlap):
    async with client(base_url) as c:
        ids = await asyncio.gather(*(start_run(c, f"question {i}?") for i in range(10)))
        streams = await asyncio.gather(*(sse(c, h) for h in ids))
        runs = (await c.get("/api/runs")).json()["runs"]
    assert len(set(ids)) == 10
    for events in streams:
        assert types(events)[-1] == "StopEvent" and answer_of(events[-1][1]) == ANSWER
        assert sum(k == "TaskResult" for k in types(events)) == 3
    assert overlap.peak >= 2
    assert {r["question"] for r in runs} == {f"question {i}?" for i in range(10)}


async def test_a_replan_is_a_new_round(overlap):
    plans = [None, '5. combine("$3", "more")\n6. join()<END_OF_PLAN>']
    from .conftest import PLAN

    llm = scripted([PLAN, plans[1]], ["Thought: Not enough.\nAction: Replan(Need more.)"])
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap, llm)}))
    try:
        async with client(url) as c:
            events = await sse(c, await start_run(c))
    finally:
        await stop(task)
    values = dict(zip(types(events), [e["value"] for _, e in events], strict=False))
    replan = values["ReplanEvent"]
    assert replan.pop("run_id")  # every event names its run
    assert replan == {"round": 1, "reason": "Need more.", "thought": "Not enough."}
    rounds = {
        t["id"]: t["round"]
        for k, (_, e) in zip(types(events), events, strict=True)
        if k == "PlanEvent"
        for t in e["value"]["tasks"]
    }
    assert rounds[1] == 0 and rounds[5] == 1
    assert types(events)[-1] == "StopEvent"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "message"),
    [
        (
            "POST",
            "/workflows/compiler/run-nowait",
            {"start_event": {"user_msg": ""}},
            400,
            "non-empty",
        ),
        (
            "POST",
            "/workflows/compiler/run-nowait",
            {"start_event": {"user_msg": "  "}},
            400,
            "non-empty",
        ),
        ("POST", "/workflows/compiler/run", {"start_event": {"user_msg": 42}}, 400, "non-empty"),
        ("POST", "/workflows/compiler/run-nowait", {}, 400, "user_msg"),
        ("POST", "/workflows/compiler/run-nowait", b"{not json", 400, "Malformed JSON"),
        ("POST", "/workflows/compiler/run-nowait", b"[1, 2]", 400, "object"),
        (
            "POST",
            "/workflows/nope/run-nowait",
            {"start_event": {"user_msg": "q"}},
            404,
            "Unknown workflow",
        ),
        ("POST", "/workflows/compiler/run-nowait", b"x" * 300_000, 413, "too large"),
        ("GET", "/events/no-such-handler?after_sequence=-1", None, 404, "not found"),
        ("GET", "/handlers/no-such-handler", None, 404, "not found"),
        ("POST", "/handlers/no-such-handler/cancel", None, 404, "not found"),
        ("POST", "/events/no-such-handler", b"{oops", 400, ""),
        ("POST", "/agui/compiler", {"messages": []}, 400, "RunAgentInput"),
        ("POST", "/agui/nope", {}, 404, "Unknown workflow"),
    ],
)
async def test_bad_requests_get_a_clear_4xx(base_url, method, path, body, status, message):
    content = body if isinstance(body, bytes) else None
    async with client(base_url) as c:
        r = await c.request(
            method,
            path,
            content=content,
            json=None if content is not None or body is None else body,
            headers={"content-type": "application/json"},
        )
    assert r.status_code == status, r.text
    assert message.lower() in r.json()["detail"].lower()


async def test_a_sqlite_store_keeps_runs_across_restarts(tmp_path, overlap):
    spec = f"sqlite:///{tmp_path / 'runs.db'}"
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, store=make_store(spec))
    )
    try:
        async with client(url) as c:
            handler_id = await start_run(c, "kept?")
            before = await sse(c, handler_id)
    finally:
        await stop(task)
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(Overlap())}, store=make_store(spec))
    )
    try:
        async with client(url) as c:
            runs = (await c.get("/api/runs")).json()["runs"]
            after = await sse(c, handler_id)
    finally:
        await stop(task)
    assert [(r["handler_id"], r["question"], r["status"]) for r in runs] == [
        (handler_id, "kept?", "completed")
    ]
    assert types(after) == types(before)


def test_unknown_store_is_a_configuration_error():
    from llm_compiler import ConfigurationError

    with pytest.raises(ConfigurationError, match="Unknown store"):
        make_store("redis://x")


async def test_the_llama_agents_client_rebuilds_typed_events(base_url):
    from llama_agents.client import WorkflowClient
    from llama_index.core.agent.workflow import AgentOutput

    from llm_compiler import CompilerStream, JoinEvent, PlanEvent, TaskReady, TaskResult
    from llm_compiler.serving.mermaid import to_mermaid

    registry = [PlanEvent, TaskReady, TaskResult, JoinEvent, CompilerStream]
    client = WorkflowClient(base_url=base_url)
    handler = await client.run_workflow_nowait("compiler", start_event={"user_msg": "a and b?"})
    events = [
        ev.load_event(registry) async for ev in client.get_workflow_events(handler.handler_id)
    ]
    results = [e for e in events if isinstance(e, TaskResult)]
    assert sorted(r.task_id for r in results) == [1, 2, 3] and all(r.duration >= 0 for r in results)
    assert str(AgentOutput.model_validate(events[-1].result)) == ANSWER  # the result is JSON
    assert "t3 --> join0" in to_mermaid(events)


async def test_a_team_is_served_with_the_compiler_events(overlap):
    from llama_index.core.agent.workflow import AgentWorkflow

    from llm_compiler import LLMCompilerAgent

    from .conftest import combine

    agent = LLMCompilerAgent(
        name="researcher",
        description="Looks things up in parallel.",
        tools=[overlap.fetch, combine],
        llm=scripted(),
    )
    team = AgentWorkflow(agents=[agent], timeout=60)
    url, task, _ = await start_server(lambda: build_app({"team": team}))
    try:
        async with client(url) as c:
            r = await c.post("/workflows/team/run-nowait", json={"start_event": {"user_msg": "q?"}})
            assert r.status_code == 200, r.text
            events = await sse(c, r.json()["handler_id"])
            runs = (await c.get("/api/runs")).json()["runs"]
            info = (await c.get("/api/info")).json()
    finally:
        await stop(task)
    kinds = types(events)
    assert kinds.count("TaskResult") == 3 and "PlanEvent" in kinds and kinds[-1] == "StopEvent"
    assert answer_of(events[-1][1]) == ANSWER
    assert runs[0]["workflow"] == "team" and runs[0]["question"] == "q?"
    assert info["default"] == "team"


async def test_a_run_is_exported_as_mermaid(base_url):
    async with client(base_url) as c:
        handler_id = await start_run(c)
        await sse(c, handler_id)
        chart = await c.get(f"/api/runs/{handler_id}/mermaid")
        missing = await c.get("/api/runs/nope/mermaid")
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("text/plain")
    assert chart.text.startswith("flowchart LR") and "  t3 --> join0" in chart.text
    assert missing.status_code == 404


async def test_plan_approval_through_the_server(overlap):
    """mode=approve: the plan waits for POST /events/{id}; edit, then the run goes on."""
    llm = scripted()
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap, llm)}))
    try:
        async with client(url) as c:
            r = await c.post(
                "/workflows/compiler/run-nowait",
                json={"start_event": {"user_msg": "alpha?", "mode": "approve"}},
            )
            assert r.status_code == 200, r.text
            handler_id = r.json()["handler_id"]
            first = await sse(c, handler_id, limit=50, stop_at="PlanApprovalRequest")
            request = first[-1][1]
            assert request["type"] == "PlanApprovalRequest"
            assert [t["id"] for t in request["value"]["plan"]["tasks"]] == [1, 2, 3]
            assert "TaskReady" not in types(first)  # nothing runs before the verdict
            edit = {"action": "edit", "plan_text": '1. fetch("gamma")\n2. join()'}
            edit |= {k: request["value"][k] for k in ("run_id", "round")}
            r = await c.post(
                f"/events/{handler_id}",
                json={"event": {"type": "PlanApprovalResponse", "value": edit}},
            )
            assert r.status_code == 200, r.text
            rest = await sse(c, handler_id, after=str(first[-1][0]))
    finally:
        await stop(task)
    kinds = types(rest)
    ran = [e["value"]["args"] for k, (_, e) in zip(kinds, rest, strict=True) if k == "TaskReady"]
    assert ran == [{"name": "gamma"}]  # the edited plan, not the model's
    assert kinds[-1] == "StopEvent"


async def test_a_bodiless_status_of_the_workflow_server_has_no_body(overlap):
    """The workflow server answers a stream of a run that just ended with a 204; with a
    JSON body there, h11 breaks the connection and the client's next request with it."""
    from starlette.exceptions import HTTPException
    from starlette.requests import Request
    from starlette.routing import Route

    served = build_app({"compiler": workflow(overlap)})

    async def ended(request: Request) -> None:
        raise HTTPException(status_code=204, detail="Handler is completed")

    async def missing(request: Request) -> None:
        raise HTTPException(status_code=404, detail="Handler not found")

    # Before the server's catch-all UI mount.
    served.server.app.router.routes[:0] = [Route("/ended", ended), Route("/missing", missing)]
    transport = httpx.ASGITransport(app=served.server.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        r = await c.get("/ended")
        assert (r.status_code, r.content) == (204, b"")
        r = await c.get("/missing")
        assert (r.status_code, r.json()) == (404, {"detail": "Handler not found"})
