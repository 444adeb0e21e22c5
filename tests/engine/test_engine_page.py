"""The live page, following a run whose plan a human edited before approving it
(headless Chromium; skipped, with the reason, where none is installed)."""

from __future__ import annotations

import asyncio
import os
import shutil

import httpx
import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving import build_app, serve
from llm_compiler.serving.server import bound_socket
from llm_compiler.testing import ScriptedLLM

pytestmark = pytest.mark.timeout(90)

PLAN = '1. search("a")\n2. search("b")\n3. search($1)\n4. join()'
FINISH = "Thought: ok.\nAction: Finish(done)"


def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


@pytest.fixture
async def browser():
    path = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if path is None:
        pytest.skip("no chromium on PATH: run `make install-browser` (apt-get install chromium)")
    playwright_api = pytest.importorskip("playwright.async_api", reason="playwright not installed")
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        await browser.close()


@pytest.fixture
async def server():
    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([PLAN, FINISH]), timeout=30)
    ready = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    app = build_app({"compiler": wf})
    sock = bound_socket("127.0.0.1", 0)
    task = asyncio.create_task(
        serve(app, "127.0.0.1", 0, sock=sock, on_ready=ready.set_result, stop=stop)
    )
    url = await asyncio.wait_for(ready, 20)
    yield url.rstrip("/")
    stop.set()
    await asyncio.wait_for(task, 20)


async def test_the_page_replaces_a_plan_edited_before_approval(browser, server):
    async with httpx.AsyncClient(base_url=server, timeout=20) as client:
        start = {"start_event": {"user_msg": "a?", "mode": "approve"}}
        r = await client.post("/workflows/compiler/run-nowait", json=start)
        assert r.status_code == 200, r.text
        handler_id, run_id = r.json()["handler_id"], r.json()["run_id"]
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        await page.goto(f"{server}/?run={handler_id}")
        # The plan as the model wrote it is drawn, waiting for a verdict.
        await page.wait_for_selector('#dag .node[data-task="3"]', timeout=15000)
        await page.wait_for_selector("#dag .node.join", timeout=15000)
        edit = {"action": "edit", "plan_text": '1. search("c")\n2. join()'}
        verdict = {"type": "PlanApprovalResponse", "value": {**edit, "run_id": run_id, "round": 0}}
        r = await client.post(f"/events/{handler_id}", json={"event": verdict})
        assert r.status_code == 200, r.text
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        nodes = await page.eval_on_selector_all(
            "#dag .node[data-task]", "gs => gs.map(g => [g.dataset.task, g.textContent])"
        )
        # Only the edited plan's one task is drawn (the pre-edit tasks 2 and 3 are gone).
        assert [task for task, _ in nodes] == ["1"]
        assert 'search(query="c")' in nodes[0][1] and '"a"' not in nodes[0][1]
        assert await page.locator("#dag .node.join").count() == 1
        assert await page.locator("#dag path.edge").count() == 1  # 1 -> join
        assert await page.locator("#dag .node.done").count() == 1
        assert errors == []
        await page.close()
