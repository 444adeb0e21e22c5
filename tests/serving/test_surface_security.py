"""The protocol surfaces (OpenAI-compatible, MCP, A2A) under the native API's rules: the
token, the origin, the body limit; malformed input gets a 4xx, never a 500."""

from __future__ import annotations

import json

import httpx
import pytest

from llm_compiler.serving import build_app
from llm_compiler.serving.security import SecurityPolicy

from .conftest import start_server, stop, workflow

pytestmark = pytest.mark.timeout(60)

TOKEN = "s3cret-token-0123456789"
AUTH = {"authorization": f"Bearer {TOKEN}"}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}
CHAT = {"model": "compiler", "messages": [{"role": "user", "content": "alpha?"}]}
#: Each new route, with a well-formed body for it.
ROUTES: list[tuple[str, str, dict | None]] = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", CHAT),
    ("POST", "/v1/responses", {"model": "compiler", "input": "alpha?"}),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
    ("GET", "/mcp", None),
    ("DELETE", "/mcp", None),
    ("POST", "/a2a", {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}),
]
#: Bodies each POST route must refuse with a 4xx: wrong shapes and types.
MALFORMED = [
    b"{",
    b"[]",
    b'"text"',
    b"{}",
    b'{"model": 3, "messages": "no"}',
    b'{"model": "compiler", "input": {"deep": [[[[1]]]]}, "messages": [1]}',
    json.dumps({"model": "compiler", "messages": [{"role": "user", "content": "\ud800"}]}).encode(),
    b'{"jsonrpc": "2.0", "method": "message/send", "params": {"message": 7}, "id": 1}',
    b'{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": 7}, "id": 1}',
]


@pytest.fixture
async def url(overlap):
    policy = SecurityPolicy.build(token=TOKEN)
    url, task, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    yield url
    await stop(task)


def _request(method: str, path: str, body: dict | None) -> dict:
    content = json.dumps(body).encode() if body is not None else None
    headers = {"content-type": "application/json", **MCP_HEADERS}
    return {"method": method, "url": path, "content": content, "headers": headers}


async def test_every_new_route_needs_the_token_and_its_own_origin(url):
    async with httpx.AsyncClient(base_url=url, timeout=20) as c:
        for method, path, body in ROUTES:
            request = _request(method, path, body)
            r = await c.request(**request)
            assert r.status_code == 401, (path, r.status_code, r.text)
            wrong = {**request["headers"], "authorization": "Bearer wrong-token-0123456789"}
            r = await c.request(**{**request, "headers": wrong})
            assert r.status_code == 401, (path, r.status_code)
            evil = {**request["headers"], **AUTH, "origin": "http://evil.example"}
            r = await c.request(**{**request, "headers": evil})
            assert r.status_code == 403, (path, r.status_code)
        # The A2A card is public (clients read it to learn they need the token), but only
        # to the server's own origin and non-browser clients.
        assert (await c.get("/.well-known/agent-card.json")).status_code == 200
        evil = {"origin": "http://evil.example"}
        assert (await c.get("/.well-known/agent-card.json", headers=evil)).status_code == 403


async def test_an_mcp_client_with_the_token_is_served(url):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from llm_compiler import _upstream

    async with _upstream.mcp_http_client()(headers=AUTH) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as c:
            result = await c.call_tool("compiler", {"question": "alpha and beta?"})
    assert not result.is_error and "combined" in result.content[0].text


async def test_bodies_that_are_too_large_or_malformed_get_a_4xx(url):
    async with httpx.AsyncClient(base_url=url, timeout=20, headers=AUTH) as c:
        for method, path, _ in ROUTES:
            if method != "POST":
                continue
            headers = {"content-type": "application/json", **MCP_HEADERS}
            big = b'{"x": "' + b"a" * (300 * 1024) + b'"}'
            r = await c.post(path, content=big, headers=headers)
            assert r.status_code == 413, (path, r.status_code)
            r = await c.post(path, content=b"{}", headers={"content-type": "text/plain"})
            assert r.status_code == 415, (path, r.status_code)
            for body in MALFORMED:
                r = await c.post(path, content=body, headers=headers)
                assert r.status_code < 500, (path, body, r.status_code, r.text)
                if r.status_code == 200:  # JSON-RPC answers a bad call with an error object
                    assert path == "/a2a" and "error" in r.json(), (path, body, r.text)
                else:
                    assert 400 <= r.status_code < 500, (path, body, r.status_code, r.text)


async def test_only_a_delete_without_a_body_skips_the_json_type(url):
    async with httpx.AsyncClient(base_url=url, timeout=20, headers=AUTH) as c:
        bare = await c.request("DELETE", "/mcp", headers=MCP_HEADERS)
        typed = await c.request(
            "DELETE", "/mcp", content=b"x", headers={"content-type": "text/plain"}
        )
    assert bare.status_code != 415 and bare.status_code < 500, bare.text
    assert typed.status_code == 415
