"""The live page shows a run's tokens, cost, LLM vs tool time and critical path."""

from __future__ import annotations

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving import build_app
from llm_compiler.tracing import ModelPrice

from .conftest import combine, scripted, start_server, stop
from .test_browser import browser  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(90)


@pytest.mark.parametrize("priced", [False, True])
async def test_the_page_shows_tokens_cost_time_and_critical_path(browser, overlap, priced):  # noqa: F811
    prices = {"scripted": ModelPrice(input=1000.0, output=2000.0)} if priced else None
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=scripted(), prices=prices)
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await page.goto(url + "/")
        await page.fill("#question", "What are alpha and beta combined?")
        await page.click("#go")
        await page.wait_for_selector("#costs:not([hidden])", timeout=20000)
        stats = {
            await s.get_attribute("data-stat"): await s.text_content()
            for s in await page.locator("#costs .stat").all()
        }
        assert stats["tokens"].startswith("Tokens: ") and "2 LLM calls" in stats["tokens"]
        if priced:
            assert stats["cost"].startswith("Cost: $")
        else:
            assert stats["cost"] == "Cost: unknown (no price for this model)"
        assert stats["time"].startswith("Time: LLM ") and " · tools " in stats["time"]
        # The chain that ended last: the later fetch, then combine.
        assert stats["critical-path"].split("(")[0].strip() in (
            "Critical path: 1 → 3",
            "Critical path: 2 → 3",
        )
        phases = await page.locator("#rounds .usage").evaluate_all(
            "ps => ps.map(p => p.dataset.phase)"
        )
        assert phases == ["planner", "joiner"]
        assert errors == []
    finally:
        await page.close()
        await stop(server)
