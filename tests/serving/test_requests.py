"""Request bodies and the run list: every bad body is a clear 4xx, and what is stored
never breaks a listing."""

from __future__ import annotations

import asyncio
import json
import logging
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from llm_compiler import ConfigurationError
from llm_compiler.engine.state import CompilerState
from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityPolicy

from .conftest import start_server, stop, workflow
from .test_security import guard_status

pytestmark = pytest.mark.timeout(60)

RUN = "/workflows/compiler/run-nowait"
JSON = {"content-type": "application/json"}


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=20)


async def handlers(c: httpx.AsyncClient) -> list[dict]:
    r = await c.get("/handlers")
    assert r.status_code == 200, r.text
    return r.json()["handlers"]


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ({"type": "CompilerStartEvent", "value": {"user_msg": "  "}}, "non-empty question"),
        ({"type": "CompilerStartEvent", "value": {"user_msg": ""}}, "non-empty question"),
        ({"value": {"user_msg": "q?"}}, '"type": "CompilerStartEvent"'),
        (json.dumps({"type": "CompilerStartEvent", "value": {"user_msg": " "}}), "non-empty"),
        (
            {"type": "CompilerStartEvent", "value": {"user_msg": "q?", "compiler_run_id": "x"}},
            "compiler_run_id",
        ),
        (
            {
                "qualified_name": "llm_compiler.events.CompilerStartEvent",
                "type": "CompilerStartEvent",
                "data": {"user_msg": "q?", "compiler_run_id": "x"},
            },
            "compiler_run_id",
        ),
        (
            json.dumps(
                {"type": "CompilerStartEvent", "value": {"compiler_run_id": "x", "user_msg": "q?"}}
            ),
            "compiler_run_id",
        ),
        ({"type": "TaskReady", "value": {"task_id": 1, "tool_name": "fetch"}}, "TaskReady"),
        ({"type": "CompilerStartEvent", "value": {"user_msg": "q?", "mode": "x"}}, "mode"),
    ],
)
async def test_an_envelope_start_event_is_checked_like_a_bare_one(base_url, start, message):
    async with client(base_url) as c:
        r = await c.post(RUN, json={"start_event": start})
        assert r.status_code == 400, r.text
        assert message in r.json()["detail"]
        assert await handlers(c) == []


async def test_an_envelope_start_event_starts_the_run_it_names(base_url):
    start = {"type": "CompilerStartEvent", "value": {"user_msg": "enveloped alpha?"}}
    async with client(base_url) as c:
        r = await c.post("/workflows/compiler/run", json={"start_event": start})
        assert r.status_code == 200 and r.json()["status"] == "completed", r.text
        handler_id = r.json()["handler_id"]
        runs = (await c.get("/api/runs")).json()["runs"]
    assert [(run["handler_id"], run["question"]) for run in runs] == [
        (handler_id, "enveloped alpha?")
    ]


def nested(depth: int) -> bytes:
    return b'{"start_event": {"user_msg": "q?", "x": ' + b"[" * depth + b"]" * depth + b"}}"


@pytest.mark.parametrize("depth", [65, 800, 10_000])
async def test_deeply_nested_json_is_a_400_on_every_body_route(base_url, depth, caplog, capfd):
    caplog.set_level(logging.WARNING)
    async with client(base_url) as c:
        for path in (RUN, "/workflows/compiler/run", "/agui/compiler", "/events/any-run"):
            r = await c.post(path, content=nested(depth), headers=JSON)
            assert r.status_code == 400, (path, r.text)
            assert "nested deeper than 64 levels" in r.json()["detail"]
        assert await handlers(c) == []
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert "Traceback" not in capfd.readouterr().err


async def test_json_as_deep_as_allowed_passes(base_url):
    async with client(base_url) as c:
        r = await c.post(RUN, content=nested(60), headers=JSON)
        assert r.status_code == 200, r.text


@pytest.mark.parametrize(
    "body",
    [
        b'{"start_event": {"user_msg": "\\ud800"}}',
        b'{"start_event": {"user_msg": "alpha \\udfff and beta?"}}',
        b'{"start_event": {"type": "CompilerStartEvent", "value": {"user_msg": "\\ud800?"}}}',
        b'{"start_event": {"user_msg": "q?"}, "\\ud800": 1}',
    ],
)
async def test_a_lone_surrogate_is_refused_at_the_door(base_url, body):
    async with client(base_url) as c:
        r = await c.post(RUN, content=body, headers=JSON)
        assert r.status_code == 400, r.text
        assert "surrogate" in r.json()["detail"]
        # A surrogate pair is text (an emoji): accepted.
        ok = await c.post(
            RUN, content=b'{"start_event": {"user_msg": "\\ud83d\\ude00?"}}', headers=JSON
        )
        assert ok.status_code == 200, ok.text
        events = f"/events/{ok.json()['handler_id']}"
        async with c.stream("GET", events, params={"after_sequence": -1}) as stream:
            await stream.aread()  # the run has finished
        runs = (await c.get("/api/runs")).json()["runs"]
        assert [run["question"] for run in runs] == ["\N{GRINNING FACE}?"]


async def stored_runs(store, count: int, question: str = "question {i}") -> list[str]:
    """Put `count` finished compiler runs in `store`, one a minute apart; their handler ids."""
    from llama_agents.server import PersistentHandler

    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = []
    for i in range(count):
        at = start + timedelta(minutes=i)
        handler = PersistentHandler(
            handler_id=f"h{i:03d}",
            workflow_name="compiler",
            status="completed",
            run_id=f"r{i:03d}",
            started_at=at,
            completed_at=at,
        )
        await store.update(handler)
        state = store.create_state_store(handler.run_id, CompilerState)
        await state.set_state(CompilerState(question=question.format(i=i)))
        ids.append(handler.handler_id)
    return ids


@asynccontextmanager
async def served_with(store, overlap):
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, store=store)
    )
    try:
        async with client(url) as c:
            yield c
    finally:
        await stop(task)


async def test_stored_text_that_is_not_unicode_never_breaks_the_run_list(overlap):
    """A run stored before the door refused lone surrogates still lists (escaped)."""
    from llama_agents.server import MemoryWorkflowStore

    store = MemoryWorkflowStore()
    await stored_runs(store, 2, question="bad \ud800 question {i}")
    async with served_with(store, overlap) as c:
        r = await c.get("/api/runs")
        assert r.status_code == 200, r.text
        assert [run["question"] for run in r.json()["runs"]] == [
            "bad \ud800 question 1",
            "bad \ud800 question 0",
        ]
        chart = await c.get("/api/runs/h001/mermaid")
        assert chart.status_code == 200


async def test_the_run_list_is_paged_newest_first(overlap):
    from llama_agents.server import MemoryWorkflowStore

    store = MemoryWorkflowStore()
    ids = await stored_runs(store, 7)
    async with served_with(store, overlap) as c:
        seen, cursor = [], None
        while True:
            params = {"limit": 3, **({"before": cursor} if cursor else {})}
            page = (await c.get("/api/runs", params=params)).json()
            assert len(page["runs"]) <= 3
            seen += [run["handler_id"] for run in page["runs"]]
            cursor = page["next"]
            if cursor is None:
                break
        assert seen == ids[::-1]
        assert len((await c.get("/api/runs")).json()["runs"]) == 7
        for bad in ({"limit": 0}, {"limit": 201}, {"limit": "x"}, {"before": "nope"}):
            r = await c.get("/api/runs", params=bad)
            assert r.status_code == 400, (bad, r.text)


async def test_the_run_list_reads_only_the_page_it_shows(overlap):
    """Questions are read for the runs shown only; the store is never asked for all runs."""
    from llama_agents.server import MemoryWorkflowStore

    store = MemoryWorkflowStore(max_completed=None)
    await stored_runs(store, 300)
    reads: list[str] = []
    queried: list[object] = []
    create = store.create_state_store
    query = store.query

    def counting(run_id, *args, **kwargs):
        reads.append(run_id)
        return create(run_id, *args, **kwargs)

    async def all_queries(q):
        queried.append(q)
        return await query(q)

    store.create_state_store = counting  # type: ignore[method-assign]
    store.query = all_queries  # type: ignore[method-assign]
    async with served_with(store, overlap) as c:
        reads.clear()
        queried.clear()
        page = (await c.get("/api/runs", params={"limit": 5})).json()
    assert [run["handler_id"] for run in page["runs"]] == [f"h{i:03d}" for i in range(299, 294, -1)]
    assert sorted(reads) == [f"r{i:03d}" for i in range(295, 300)]
    assert queried == []


def test_a_wildcard_host_needs_a_token_or_insecure():
    with pytest.raises(ConfigurationError, match="DNS-rebinding"):
        SecurityPolicy.build(allow_hosts=["*"])
    assert SecurityPolicy.build(token="t" * 20, allow_hosts=["*"]).host_allowed("any.example")
    assert SecurityPolicy.build(allow_hosts=["*"], insecure=True).host_allowed("any.example")


async def test_a_wildcard_host_without_a_token_keeps_the_rebinding_defence():
    """A policy built by hand with ``*`` and no token still refuses a rebinding page's POST."""
    policy = SecurityPolicy(allow_hosts=frozenset({"*"}))
    headers = [(b"host", b"rebind.evil.example:8000"), (b"content-type", b"application/json")]
    assert await guard_status(policy, headers, method="POST", path=RUN) == 421
    tokened = SecurityPolicy.build(token="t" * 20, allow_hosts=["*"])
    assert await guard_status(tokened, headers, method="POST", path=RUN) == 401


def test_the_cli_refuses_a_wildcard_host_without_a_token(capsys, caplog, monkeypatch):
    from llm_compiler.cli import main, parse, security_policy

    monkeypatch.delenv("LLM_COMPILER_TOKEN", raising=False)
    argv = ["serve", "--allow-host", "*", "--workflow", "tests.serving.cli_app:make"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "DNS-rebinding" in err and "--insecure" in err and len(err.strip().splitlines()) == 1
    insecure = security_policy(parse(["serve", "--allow-host", "*", "--insecure"], {}))
    assert insecure.any_host
    from llm_compiler.serving.server import check_exposure

    check_exposure(insecure, "127.0.0.1")
    assert "DNS rebinding" in caplog.text


async def test_the_mcp_tool_timeout_is_a_flag(monkeypatch):
    import llm_compiler.tools as tools
    from llm_compiler.cli import MCP_TOOL_TIMEOUT, _tool_options, parser

    @asynccontextmanager
    async def no_server(*commands):
        yield []

    monkeypatch.setattr(tools, "tools_from_mcp", no_server)
    args = parser().parse_args(["serve", "--mcp", "python -m srv", "--mcp-tool-timeout", "90"])
    assert args.mcp_tool_timeout == 90.0
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        assert (await _tool_options(stack, ["python -m srv"], 90.0))["tool_timeout"] == 90.0
        assert (await _tool_options(stack, ["python -m srv"]))["tool_timeout"] == MCP_TOOL_TIMEOUT
    for bad in ("0", "-1", "soon", "inf"):
        with pytest.raises(SystemExit):
            parser().parse_args(["serve", "--mcp", "x", "--mcp-tool-timeout", bad])


def test_the_mcp_tool_timeout_needs_mcp(capsys):
    from llm_compiler.cli import main

    assert main(["serve", "--mcp-tool-timeout", "5"]) == 1
    assert "--mcp-tool-timeout" in capsys.readouterr().err


async def test_keep_alive_outlasts_the_http_client_pool(base_url):
    """httpx drops an idle pooled connection after 5 s; the server must keep it longer, or
    a request sent on a connection the server is closing that moment fails (ReadError)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    request = f"GET /api/info HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    writer.write(request)
    await response(reader)
    async with httpx.AsyncClient(base_url=base_url, timeout=20) as c:  # httpx's default pool
        first = await asyncio.gather(*(c.get("/api/info") for _ in range(100)))
        # Idle just under httpx's expiry: the pool reuses every connection.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1 << 16), 4.95)
        second = await asyncio.gather(
            *(c.get("/api/info") for _ in range(100)), return_exceptions=True
        )
    errors = [r for r in second if isinstance(r, BaseException)]
    assert errors == [] and all(r.status_code == 200 for r in [*first, *second])
    # The raw connection, idle past 5 s, is still open and still answers.
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.read(1 << 16), 0.6)
    writer.write(request)
    assert (await response(reader)).startswith(b"HTTP/1.1 200")
    writer.close()


async def response(reader: asyncio.StreamReader) -> bytes:
    """One whole HTTP/1.1 response with a content-length (its head)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    await reader.readexactly(length)
    return head


async def test_an_agui_400_names_every_missing_or_invalid_field(base_url):
    async with client(base_url) as c:
        r = await c.post("/agui/compiler", json={"messages": [{"id": "m1", "role": "nobody"}]})
        assert r.status_code == 400
        detail = r.json()["detail"]
        assert detail.startswith("Not an AG-UI RunAgentInput: ")
        for field in ("threadId", "runId", "messages.0"):
            assert field in detail, detail
        r = await c.post("/agui/compiler", content=nested(10_000), headers=JSON)
        assert r.status_code == 400
