"""What the live page tells a user: planning, runs by question, arguments whole, costs
and the critical path in words, each run once, the question of the run on view."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import PrivateAttr

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving import build_app

from .conftest import JOINER_MARK, combine, scripted, start_server, stop
from .test_browser import browser  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(90)

LONG = "alpha-" + "x" * 60 + "-end"
PLAN = f'1. fetch("{LONG}")\n2. fetch("beta")\n3. combine("$1", "$2")\n4. join()<END_OF_PLAN>'
QUESTION = "What are the long alpha and beta combined?"


class HeldPlanner(type(scripted())):  # type: ignore[misc]
    """The scripted model whose first planner call waits for `go` (a planner at work)."""

    _go: asyncio.Event = PrivateAttr(default_factory=asyncio.Event)
    _held: asyncio.Event = PrivateAttr(default_factory=asyncio.Event)

    async def on_chunk(self, index: int, chunk: str) -> None:
        last = self.calls[-1]
        if index == 0 and JOINER_MARK not in last.prompt and len(self.calls) == 1:
            self._held.set()
            await self._go.wait()


def held_planner() -> HeldPlanner:
    base = scripted([PLAN])
    return HeldPlanner(base._script, tokens_per_chunk=2)


async def texts(page, selector: str) -> list[str]:
    return await page.locator(selector).all_text_contents()


async def test_the_page_says_what_happens_and_what_it_shows(browser, overlap, tmp_path):  # noqa: F811
    llm = held_planner()
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=llm, max_replans=0, timeout=60)
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await page.goto(url + "/")
        await page.fill("#question", QUESTION)
        await page.click("#go")
        await asyncio.wait_for(llm._held.wait(), 15)
        # The model reads its prompt (no token yet): the page says so, not "planning" over an
        # empty box, and lists the run by its question.
        await page.wait_for_function(
            "document.querySelector('#status').textContent.includes('reads its prompt')",
            timeout=10000,
        )
        assert "Connecting" not in await page.text_content("#status")
        assert "reading its prompt" in await page.text_content("#rounds .reading")
        await page.screenshot(path=str(tmp_path / "reading.png"), full_page=True)
        await page.wait_for_function(
            f"document.querySelector('#runs').textContent.includes({QUESTION!r})", timeout=10000
        )
        run_id = page.url.split("?run=")[1]
        assert run_id not in await page.text_content("#runs")
        await page.screenshot(path=str(tmp_path / "planning.png"), full_page=True)
        llm._go.set()
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        assert await page.locator("#rounds .reading").count() == 0
        await page.wait_for_selector("#costs:not([hidden])", timeout=15000)
        # A long argument is cut on its node, and whole in its tooltip and its details.
        node = page.locator('#dag .node[data-task="1"]')
        assert (await node.locator("text.args").text_content()).endswith("…")
        assert LONG in await node.locator("title").text_content()
        await node.click()
        assert LONG in await page.text_content("#details")
        # A model without a price: "unknown" once, in the totals.
        body = await page.inner_text("body")
        assert body.count("unknown") == 1, body
        assert "Cost: unknown (no price for this model)" in body
        assert "· 2 LLM calls" in body
        assert await page.evaluate("plural(1, 'LLM call')") == "1 LLM call"
        path = await page.text_content('#costs [data-stat="critical-path"]')
        assert path.startswith(("Critical path: 1 → 3 (", "Critical path: 2 → 3 ("))
        assert "the chain of tasks that set how long the tools took" in path
        assert "chain of tasks" in await page.get_attribute(
            '#costs [data-stat="critical-path"]', "title"
        )
        await page.screenshot(path=str(tmp_path / "answered.png"), full_page=True)

        # A second question; then the first run again from the list: its question is shown.
        await page.fill("#question", "What are alpha and beta?")
        await page.click("#go")
        await page.wait_for_function(f"!location.search.includes({run_id!r})", timeout=10000)
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        await page.click(f'#runs a[href="?run={run_id}"]')
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        assert await page.input_value("#question") == QUESTION

        # Opened by its URL in a fresh tab: listed once, its question in the box.
        other = await browser.new_page(viewport={"width": 1400, "height": 900})
        other.on("pageerror", lambda e: errors.append(str(e)))
        await other.goto(f"{url}/?run={run_id}")
        await other.wait_for_selector("#answer:not([hidden])", timeout=15000)
        await other.wait_for_function(
            "document.querySelectorAll('#runs li').length === 2", timeout=10000
        )
        await other.wait_for_function(
            f"document.querySelector('#question').value === {QUESTION!r}", timeout=10000
        )
        links = await texts(other, "#runs a")
        assert sorted(links) == sorted([QUESTION, "What are alpha and beta?"]), links
        assert await other.locator(f'#runs a[href="?run={run_id}"]').count() == 1
        await other.screenshot(path=str(tmp_path / "opened.png"), full_page=True)
        assert errors == []
    finally:
        await page.close()
        await stop(server)
