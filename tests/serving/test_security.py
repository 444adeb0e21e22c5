"""Attacks on the served API: other origins, forged Host names, forged events, no token."""

from __future__ import annotations

import json

import httpx
import pytest

from llm_compiler import ConfigurationError
from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityGuard, SecurityPolicy
from llm_compiler.serving.server import check_exposure

from .conftest import sse, start_run, start_server, stop, workflow

pytestmark = pytest.mark.timeout(60)

EVIL = "http://evil.example"
TOKEN = "s3cret-token-0123456789"
RUN = "/workflows/compiler/run-nowait"
QUESTION = json.dumps({"start_event": {"user_msg": "alpha and beta?"}})


@pytest.fixture
async def served(overlap):
    """(url, policy-less app) serving the compiler with the default policy."""
    url, task, app = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    yield url, app
    await stop(task)


async def handler_count(c: httpx.AsyncClient, headers: dict | None = None) -> int:
    r = await c.get("/handlers", headers=headers)
    assert r.status_code == 200, r.text
    return len(r.json()["handlers"])


async def test_another_origin_cannot_start_a_run(served):
    url, _ = served
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        # A page's fetch with text/plain needs no preflight: refused, and nothing starts.
        plain = {"content-type": "text/plain", "origin": EVIL}
        r = await c.post(RUN, content=QUESTION, headers=plain)
        assert r.status_code == 403 and "evil.example" in r.json()["detail"]
        r = await c.post(
            RUN, content=QUESTION, headers={**plain, "content-type": "application/json"}
        )
        assert r.status_code == 403
        form = {"content-type": "application/x-www-form-urlencoded", "origin": EVIL}
        assert (await c.post("/handlers/x/cancel", content=b"a=1", headers=form)).status_code == 403
        assert (await c.get("/handlers", headers={"origin": EVIL})).status_code == 403
        preflight = await c.options(
            RUN,
            headers={
                "origin": EVIL,
                "access-control-request-method": "POST",
                "access-control-request-headers": "content-type",
            },
        )
        assert preflight.status_code == 403
        assert "access-control-allow-origin" not in preflight.headers
        assert "access-control-allow-credentials" not in preflight.headers
        assert (await c.post(RUN, content=QUESTION, headers={"origin": "null"})).status_code == 403
        assert await handler_count(c) == 0


async def test_state_changes_need_a_json_content_type(served):
    url, _ = served
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            r = await c.post(RUN, content=QUESTION, headers={"content-type": kind})
            assert r.status_code == 415 and kind in r.json()["detail"], r.text
        r = await c.post(RUN, content=QUESTION)  # no content type at all
        assert r.status_code == 415
        assert await handler_count(c) == 0
        same = {"origin": url, "content-type": "application/json; charset=utf-8"}
        assert (await c.post(RUN, content=QUESTION, headers=same)).status_code == 200
        assert await handler_count(c) == 1


async def test_the_host_header_must_name_this_server(served):
    url, _ = served
    port = url.rsplit(":", 1)[1]
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        for host in ("evil.example", f"evil.example:{port}", f"rebind.attacker.test:{port}"):
            r = await c.get("/api/info", headers={"host": host})
            assert r.status_code == 421 and "--allow-host" in r.json()["detail"], host
            r = await c.post(
                RUN, content=QUESTION, headers={"host": host, "content-type": "application/json"}
            )
            assert r.status_code == 421
        for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert (await c.get("/api/info", headers={"host": host})).status_code == 200, host
        assert (await c.get("/api/info", headers={"host": "bad host!"})).status_code == 400
        assert await handler_count(c) == 0


async def guard_status(policy: SecurityPolicy, headers: list[tuple[bytes, bytes]], **scope) -> int:
    """Run the guard alone on one request; the status it answers (200: passed through)."""
    sent: list[dict] = []

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    base = {"type": "http", "method": "GET", "path": "/api/info", "scheme": "http"}
    await SecurityGuard(app, policy)({**base, **scope, "headers": headers}, receive, send)
    return sent[0]["status"]


async def test_missing_or_allowed_hosts():
    policy = SecurityPolicy.build(allow_hosts=["box.lan"])
    assert await guard_status(policy, []) == 400  # HTTP/1.0 without a Host header
    assert await guard_status(policy, [(b"host", b"box.lan:8000")]) == 200
    assert await guard_status(policy, [(b"host", b"other.lan:8000")]) == 421
    anyhost = SecurityPolicy.build(allow_hosts=["*"], insecure=True)  # see test_requests
    assert await guard_status(anyhost, [(b"host", b"other.lan")]) == 200
    # Behind a TLS proxy the browser's origin is https, the server hears http: same origin.
    proxied = [(b"host", b"box.lan"), (b"origin", b"https://box.lan")]
    assert await guard_status(policy, proxied, method="POST") == 415  # past the origin check
    other_port = [(b"host", b"localhost"), (b"origin", b"http://localhost:3000")]
    assert await guard_status(policy, other_port) == 403
    # Another site's <img> or <script> sends no Origin, but the browser says cross-site.
    cross = [(b"host", b"localhost"), (b"sec-fetch-site", b"cross-site")]
    assert await guard_status(policy, cross) == 403
    assert await guard_status(policy, cross, path="/") == 200  # a link to the page is fine
    assert (
        await guard_status(policy, [(b"host", b"localhost"), (b"sec-fetch-site", b"same-origin")])
        == 200
    )


async def test_a_listed_origin_may_call_without_credentials(overlap):
    app = "http://app.example:3000"
    policy = SecurityPolicy.build(allow_origins=[app + "/"])
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            preflight = await c.options(
                RUN,
                headers={
                    "origin": app,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "content-type, authorization",
                },
            )
            assert preflight.status_code == 200
            assert preflight.headers["access-control-allow-origin"] == app
            assert "access-control-allow-credentials" not in preflight.headers
            r = await c.post(RUN, json={"start_event": {"user_msg": "q?"}}, headers={"origin": app})
            assert r.status_code == 200 and r.headers["access-control-allow-origin"] == app
            r = await c.post(
                RUN, content=QUESTION, headers={"origin": EVIL, "content-type": "application/json"}
            )
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
            # A listed origin's script can read why it was refused.
            r = await c.post(RUN, content=QUESTION, headers={"origin": app})
            assert r.status_code == 415 and r.headers["access-control-allow-origin"] == app
    finally:
        await stop(task)


def test_origins_are_checked_when_configured():
    with pytest.raises(ConfigurationError, match="no wildcards"):
        SecurityPolicy.build(allow_origins=["*"])
    with pytest.raises(ConfigurationError, match="origin like"):
        SecurityPolicy.build(allow_origins=["https://app.example/path"])
    assert SecurityPolicy.build(allow_origins=["HTTPS://App.Example:443"]).allow_origins == {
        "https://app.example"
    }
    hosts = SecurityPolicy.build(TOKEN, allow_hosts=["Box.LAN:8000", "[fe80::1]", "*"]).allow_hosts
    assert hosts == {"box.lan", "fe80::1", "*"}
    with pytest.raises(ConfigurationError, match="--allow-host"):
        SecurityPolicy.build(allow_hosts=["http://box"])
    with pytest.raises(ConfigurationError, match="at least 16"):
        SecurityPolicy.build(token="short")


ENGINE_EVENTS = {
    "TaskReady": {"task_id": 9, "tool_name": "combine", "args": {"a": "x", "b": "y"}, "round": 0},
    "TaskResult": {"task_id": 1, "tool_name": "fetch", "output": "forged", "round": 0},
    "PlanEvent": {"round": 0, "tasks": []},
    "JoinEvent": {"round": 0},
    "ReplanEvent": {"round": 1, "reason": "forged"},
    "StopEvent": {"result": "forged answer"},
    "CompilerStartEvent": {"user_msg": "another question"},
    "PlanApprovalRequest": {"round": 0},
}


async def test_only_client_events_reach_a_run(overlap):
    """Engine events are refused (403); the run waits for its verdict, untouched."""
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            r = await c.post(RUN, json={"start_event": {"user_msg": "alpha?", "mode": "approve"}})
            handler_id = r.json()["handler_id"]
            first = await sse(c, handler_id, limit=50, stop_at="PlanApprovalRequest")
            request = first[-1][1]["value"]
            run_id = request["run_id"]
            for kind, value in ENGINE_EVENTS.items():
                event = {"type": kind, "value": {**value, "run_id": run_id}}
                r = await c.post(f"/events/{handler_id}", json={"event": event})
                assert r.status_code == 403, (kind, r.text)
                assert f"Clients may not send {kind}" in r.json()["detail"]
            # The deprecated qualified-name form and the JSON-string form are refused too.
            qualified = {
                "qualified_name": "llm_compiler.events.TaskReady",
                "value": ENGINE_EVENTS["TaskReady"],
            }
            r = await c.post(f"/events/{handler_id}", json={"event": qualified})
            assert r.status_code == 400
            as_string = json.dumps({"type": "TaskReady", "value": ENGINE_EVENTS["TaskReady"]})
            r = await c.post(f"/events/{handler_id}", json={"event": as_string})
            assert r.status_code == 403
            status = (await c.get(f"/handlers/{handler_id}")).json()["status"]
            assert status == "running" and overlap.peak == 0  # no tool ran
            # Verdicts for another run or round, or malformed ones, are refused.
            for wrong in ({"run_id": "other", "round": 0}, {"run_id": run_id, "round": 1}):
                event = {"type": "PlanApprovalResponse", "value": {"action": "approve", **wrong}}
                r = await c.post(f"/events/{handler_id}", json={"event": event})
                assert r.status_code == 409 and "waiting is run" in r.json()["detail"]
            bare = {"type": "PlanApprovalResponse", "value": {"action": "approve"}}
            r = await c.post(f"/events/{handler_id}", json={"event": bare})
            assert r.status_code == 400 and "run_id" in r.json()["detail"]
            assert overlap.peak == 0
            verdict = {"action": "approve", "run_id": run_id, "round": request["round"]}
            event = {"type": "PlanApprovalResponse", "value": verdict}
            assert (await c.post(f"/events/{handler_id}", json={"event": event})).status_code == 200
            rest = await sse(c, handler_id, after=str(first[-1][0]))
            late = await c.post(f"/events/{handler_id}", json={"event": event})
    finally:
        await stop(task)
    kinds = [e["type"] for _, e in rest]
    ready = sorted(e["value"]["task_id"] for _, e in rest if e["type"] == "TaskReady")
    assert ready == [1, 2, 3] and kinds[-1] == "StopEvent"  # only the planned tasks ran
    outputs = [e["value"]["output"] for _, e in rest if e["type"] == "TaskResult"]
    assert "forged" not in outputs
    assert late.status_code in (404, 409)  # a duplicate after the run: refused


async def test_a_client_cannot_choose_internal_ids_or_state(served):
    """A run's id and its saved context are the server's: a client may not supply them."""
    url, _ = served
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        start = {"user_msg": "q?", "compiler_run_id": "another-runs-id"}
        r = await c.post(RUN, json={"start_event": start})
        assert r.status_code == 400 and "compiler_run_id" in r.json()["detail"]
        r = await c.post(RUN, json={"start_event": {"user_msg": "q?"}, "context": {"state": {}}})
        assert r.status_code == 400 and "Context API is disabled" in r.json()["detail"]
        assert await handler_count(c) == 0


async def test_an_unknown_run_gets_404(served):
    url, _ = served
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        event = {"type": "PlanApprovalResponse", "value": {"run_id": "x", "round": 0}}
        r = await c.post("/events/nope", json={"event": event})
        assert r.status_code == 404
        r = await c.post("/events/nope", json={"event": 5})
        assert r.status_code in (400, 404)


async def test_every_api_route_needs_the_token(overlap):
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    good = {"authorization": f"Bearer {TOKEN}"}
    try:
        async with (
            httpx.AsyncClient(base_url=url, timeout=20) as c,
            httpx.AsyncClient(base_url=url, timeout=20, headers=good) as user,
        ):
            assert (await c.get("/")).status_code == 200  # the page shell holds no data
            assert (await c.get("/static/app.js")).status_code == 200
            icon = await c.get("/favicon.ico")  # the browser asks for it without the token
            assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
            handler_id = await start_run(user)
            routes = [
                ("GET", "/api/info"),
                ("GET", "/api/runs"),
                ("GET", f"/api/runs/{handler_id}/mermaid"),
                ("GET", "/handlers"),
                ("GET", f"/handlers/{handler_id}"),
                ("GET", f"/events/{handler_id}?after_sequence=-1"),
                ("GET", f"/results/{handler_id}"),
                ("GET", "/workflows"),
                ("GET", "/health"),
                ("POST", RUN),
                ("POST", "/agui/compiler"),
                ("POST", f"/events/{handler_id}"),
                ("POST", f"/handlers/{handler_id}/cancel"),
            ]
            bad = [
                None,
                "Bearer wrong-token-0123456789",
                f"Basic {TOKEN}",
                f"Bearer {TOKEN}x",
                TOKEN,
            ]
            for method, path in routes:
                for header in bad:
                    headers = {"content-type": "application/json"}
                    if header is not None:
                        headers["authorization"] = header
                    r = await c.request(method, path, content=QUESTION, headers=headers)
                    assert r.status_code == 401, (method, path, header, r.status_code)
                    assert r.headers["www-authenticate"] == "Bearer"
            assert (await c.get("/api/info", headers=good)).status_code == 200
            events = await sse(c, handler_id, headers=good)
            assert events[-1][1]["type"] == "StopEvent"
            assert await handler_count(c, good) == 1
    finally:
        await stop(task)


def test_serving_beyond_loopback_needs_a_token(caplog):
    with pytest.raises(ConfigurationError, match="without a token"):
        check_exposure(SecurityPolicy(), "0.0.0.0")
    check_exposure(SecurityPolicy.build(token=TOKEN), "0.0.0.0")
    check_exposure(SecurityPolicy(), "127.0.0.1")
    check_exposure(SecurityPolicy(insecure=True), "0.0.0.0")
    assert "WITHOUT A TOKEN" in caplog.text


def test_the_cli_refuses_to_expose_without_a_token(capsys, monkeypatch):
    from llm_compiler.cli import main, parse, security_policy

    monkeypatch.delenv("LLM_COMPILER_TOKEN", raising=False)
    assert main(["serve", "--host", "0.0.0.0", "--workflow", "tests.serving.cli_app:make"]) == 1
    err = capsys.readouterr().err
    assert "without a token" in err and "--insecure" in err and len(err.strip().splitlines()) == 1
    argv = ["serve", "--host", "10.0.0.5", "--allow-origin", "https://a.example"]
    args = parse([*argv, "--allow-host", "box"], environ={"LLM_COMPILER_TOKEN": TOKEN})
    policy = security_policy(args)
    assert policy.token == TOKEN and policy.allow_origins == {"https://a.example"}
    assert policy.allow_hosts == {"box", "10.0.0.5"} and not policy.insecure
    assert security_policy(parse(["serve", "--token", "x" * 20], {})).token == "x" * 20
    assert parse(["serve", "--insecure"], {}).insecure


def test_the_token_stays_out_of_reprs():
    assert TOKEN not in repr(SecurityPolicy.build(token=TOKEN))
