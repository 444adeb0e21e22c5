"""``/livez`` and ``/readyz``: open without the token or a known Host, saying nothing but
ok or unavailable (and, for readiness, the store); readiness follows startup, draining,
the store and the model endpoint; during a database outage liveness stays 200, readiness
is 503, and requests that would wait on the store answer 503 with Retry-After at once."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from llama_index.llms.openai_like import OpenAILike

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving import SecurityPolicy, build_app
from llm_compiler.serving.ops import Operations, model_endpoints
from tests.serving.conftest import start_server, stop

from .conftest import TOKEN, Served, scripted

pytestmark = pytest.mark.timeout(120)


def lookup(q: str) -> str:
    """Look up."""
    return q


def scripted_app(**options):
    from examples.served_scripted import make

    return build_app({"compiler": make()}, **options)


async def test_probes_answer_anyone_and_say_nothing_else():
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, served = await start_server(lambda: scripted_app(policy=policy))
    try:
        async with httpx.AsyncClient(base_url=url) as c:
            for host in ("127.0.0.1", "10.1.2.3:8000", "pod.cluster.local"):
                for path, said in (("/livez", {}), ("/readyz", {"store": "memory"})):
                    r = await c.get(path, headers={"host": host})
                    assert r.status_code == 200, (host, path)
                    assert r.json() == {"status": "ok", **said}, (host, path)
                    assert r.headers["cache-control"] == "no-store"
            assert (await c.get("/api/info")).status_code == 401  # the rest needs the token
            assert (await c.post("/livez", json={})).status_code == 401
            served.ops.draining = True
            r = await c.get("/readyz")
            assert r.status_code == 503
            assert r.json() == {"status": "unavailable", "store": "memory"}
            assert (await c.get("/livez")).status_code == 200
    finally:
        await stop(task)
    assert not served.ops.started


async def test_readiness_waits_for_the_model_endpoint():
    down = OpenAILike(model="m", api_base="http://127.0.0.1:9/v1", api_key="none")
    wf = LLMCompilerWorkflow(tools=[lookup], llm=down)
    assert model_endpoints([wf]) == ["http://127.0.0.1:9/v1"]
    ops = Operations({"compiler": wf})
    ops.started = True
    assert await ops.unready() == "the model endpoint http://127.0.0.1:9/v1 does not answer"

    async def models(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(models, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    up = OpenAILike(model="m", api_base=f"http://127.0.0.1:{port}/v1", api_key="none")
    ops = Operations({"compiler": LLMCompilerWorkflow(tools=[lookup], llm=up)})
    ops.started = True
    async with server:
        assert await ops.unready() is None  # a 401 still answers: the endpoint is up


def test_an_outage_keeps_liveness_fails_readiness_and_refuses_fast(cluster, tmp_path, served):
    env = scripted(cluster, 0)
    server = Served(tmp_path, env, "--outage-limit", "60")
    served.append(server)
    c = server.client
    assert c.get("/readyz").status_code == 200
    body = {"start_event": {"user_msg": "Oslo?"}}
    cluster.stop()
    try:
        deadline = time.monotonic() + 30
        while c.get("/readyz").status_code != 503:  # its lock's connection closed
            assert time.monotonic() < deadline, "the outage was never noticed"
            time.sleep(0.1)
        assert c.get("/livez").status_code == 200
        assert c.get("/readyz").json()["status"] == "unavailable"
        for method, path in [("POST", "/workflows/compiler/run-nowait"), ("GET", "/api/runs")]:
            started = time.monotonic()
            r = c.request(method, path, json=body if method == "POST" else None, timeout=5)
            assert r.status_code == 503 and r.headers["retry-after"] == "5", r.text
            assert time.monotonic() - started < 2
        assert c.get("/health").json()["status"] == "degraded"
    finally:
        cluster.start()
    deadline = time.monotonic() + 30
    while c.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, "never ready again"
        time.sleep(0.2)
    r = c.post("/workflows/compiler/run-nowait", json=body)
    assert r.status_code == 200, r.text
    assert server.stop() == 0
    logged = server.err.read_text()
    assert "Traceback" not in logged, logged  # an outage is handled: warnings, no traceback
