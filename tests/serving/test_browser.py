"""The live page in headless Chromium (Debian's package, driven by Playwright).

Skipped, with the reason, where no Chromium is installed (``make install-browser``).
"""

from __future__ import annotations

import asyncio
import os
import shutil

import pytest

from llm_compiler.serving import build_app

from .conftest import ANSWER, start_server, stop, workflow

pytestmark = pytest.mark.timeout(90)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str:
    """The system Chromium, or skip the test saying why."""
    path = (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
    if path is None:
        pytest.skip("no chromium on PATH: run `make install-browser` (apt-get install chromium)")
    return path


@pytest.fixture
async def browser():
    path = chromium_path()
    playwright_api = pytest.importorskip("playwright.async_api", reason="playwright not installed")
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=path, headless=True, args=FLAGS)
        yield browser
        await browser.close()


async def test_the_page_shows_the_plan_run_live(browser, overlap, tmp_path):
    overlap.release = asyncio.Event()  # tools hold until the page has shown both running
    url, server, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await page.goto(url + "/")
        await page.fill("#question", "What are alpha and beta combined?")
        await page.click("#go")
        # Both fetches are drawn running at the same time, before either may finish.
        await page.wait_for_function(
            "document.querySelectorAll('#dag .node.running').length === 2", timeout=15000
        )
        first = await page.get_attribute('#dag .node[data-task="1"]', "transform")
        overlap.release.set()
        await page.wait_for_function(
            "document.querySelectorAll('#dag .node.done').length === 3", timeout=15000
        )
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        assert (await page.text_content("#answer")) == ANSWER
        assert await page.get_attribute("#dag", "data-peak-running") == "2"
        # The layout never moved: node 1 is where it was drawn; the join is there.
        assert await page.get_attribute('#dag .node[data-task="1"]', "transform") == first
        assert await page.locator("#dag .node.join").count() == 1
        assert await page.locator("#dag path.edge").count() == 3  # 1->3, 2->3, 3->join
        assert await page.locator("#gantt rect.bar").count() == 3
        # A node's details: resolved arguments and output.
        await page.click('#dag .node[data-task="3"]')
        details = await page.text_content("#details")
        assert "value of alpha + value of beta" in details and '"a": "value of alpha"' in details
        assert "Finish(" in await page.text_content("#rounds")
        await page.screenshot(path=str(tmp_path / "live-page.png"), full_page=True)
        assert (tmp_path / "live-page.png").stat().st_size > 10_000
        # Reloading replays the run from its events; the run is in the list.
        run_url = page.url
        assert "?run=" in run_url
        await page.reload()
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        assert await page.locator("#dag .node.done").count() == 3
        # The run list loads on its own request: wait for it rather than race it.
        await page.wait_for_function(
            "document.querySelector('#runs').textContent"
            ".includes('What are alpha and beta combined?')",
            timeout=15000,
        )
        assert errors == []
    finally:
        await page.close()
        await stop(server)


async def test_two_tabs_follow_different_runs(browser, overlap):
    url, server, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    try:
        tabs = [await browser.new_page() for _ in range(2)]
        for i, tab in enumerate(tabs):
            await tab.goto(url + "/")
            await tab.fill("#question", f"question {i}")
            await tab.click("#go")
        for tab in tabs:
            await tab.wait_for_selector("#answer:not([hidden])", timeout=15000)
            assert await tab.locator("#dag .node.done").count() == 3
        assert tabs[0].url != tabs[1].url
    finally:
        await stop(server)


async def test_a_failed_run_shows_its_error(browser, overlap):
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    from .conftest import combine

    llm = ScriptedLLM([RuntimeError("model down")])
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=llm, timeout=30)
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    try:
        page = await browser.new_page()
        await page.goto(url + "/")
        await page.click("#go")  # the sample question from /api/info
        await page.wait_for_selector("#error:not([hidden])", timeout=15000)
        assert "model down" in await page.text_content("#error")
        assert await page.text_content("#status") == "Failed"
    finally:
        await stop(server)


async def test_a_replan_is_drawn_as_a_new_round_to_the_right(browser, overlap):
    from .conftest import PLAN, scripted

    replan = '5. combine("$3", "more")\n6. join()<END_OF_PLAN>'
    llm = scripted([PLAN, replan], ["Thought: Not enough.\nAction: Replan(Need more.)"])
    url, server, _ = await start_server(lambda: build_app({"compiler": workflow(overlap, llm)}))
    try:
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        await page.goto(url + "/")
        await page.click("#go")
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        labels = await page.locator("#dag .round-label").all_text_contents()
        assert labels == ["Round 0", "Round 1"]
        assert await page.locator("#dag .node.join").count() == 2
        x = await page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('#dag .node')].map(
                (g, i) => [g.dataset.task || 'join' + i, g.transform.baseVal[0].matrix.e]))"""
        )
        joins = sorted(v for k, v in x.items() if k.startswith("join"))
        assert x["3"] < joins[0] < x["5"] < joins[1]  # round 1 sits right of round 0's join
        assert "Replan: Need more." in await page.text_content("#rounds")
    finally:
        await stop(server)


async def test_a_plan_with_no_tasks_is_shown_as_such(browser, overlap):
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    from .conftest import combine

    llm = ScriptedLLM(['fetch("alpha")<END_OF_PLAN>', "Thought: no results.\nAction: Finish(?)"])
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=llm, max_replans=0, timeout=30)
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    try:
        page = await browser.new_page()
        await page.goto(url + "/")
        await page.click("#go")
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        note = await page.text_content("#rounds .no-tasks")
        assert note is not None and note.startswith("No tasks planned: The plan has no tasks.")
    finally:
        await stop(server)
