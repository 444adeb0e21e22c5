"""Tool policies on the live page: a held node with approve / edit / reject, while the
other tasks finish; a wait for a resource key and the time waited; the timeline's held and
waiting spans and its marks where retries started."""

from __future__ import annotations

import asyncio

import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.serving import build_app

from .conftest import combine, scripted, start_server, stop
from .test_browser import browser  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(90)


async def test_a_held_task_is_approved_with_edited_arguments_on_the_page(browser, overlap):  # noqa: F811
    wf = LLMCompilerWorkflow(
        tools=[overlap.fetch, combine],
        llm=scripted(),
        timeout=60,
        tool_policies={"combine": ToolPolicy(requires_approval=True)},
    )
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    missing: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("response", lambda r: r.status >= 400 and missing.append(f"{r.status} {r.url}"))
    try:
        await page.goto(url + "/")
        await page.fill("#question", "alpha and beta?")
        await page.click("#go")
        await page.wait_for_selector('#dag .node.held[data-task="3"]', timeout=15000)
        await page.wait_for_function(
            "document.querySelectorAll('#dag .node.done').length === 2", timeout=15000
        )
        # The plan is complete, but what the run waits for is the held task.
        status = await page.text_content("#status")
        assert status is not None and "plan complete" not in status, status
        assert "Task 3 (combine) waits for your approval" in status, status
        note = await page.text_content('#dag .node[data-task="3"] .note')
        assert note is not None and "approval" in note
        await page.click('#dag .node[data-task="3"]')
        await page.wait_for_selector('#details button[data-verdict="edit"]')
        policy = await page.text_content("#details")
        assert policy is not None and "needs approval" in policy
        await page.fill("#d-args", '{"a": "A", "b": "B"}')
        await page.click('#details button[data-verdict="edit"]')
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        await page.wait_for_selector('#dag .node.done[data-task="3"]', timeout=15000)
        # The details panel, left open, follows the task to its end without a click.
        details = await page.text_content("#details")
        assert details is not None and "A + B" in details and "Statedone" in details, details
        assert await page.text_content("#status") == "Done"
        held = page.locator('#gantt .held-span[data-task="3"]')  # the time it waited for us
        assert await held.count() == 1
        assert "held for approval" in (await held.locator("title").text_content() or "")
        assert float(await held.get_attribute("width") or 0) > 2
    finally:
        await page.close()
        await stop(server)
    assert errors == []
    assert missing == []  # the favicon included


async def test_a_wait_for_a_resource_key_is_shown(browser):  # noqa: F811
    release = asyncio.Event()

    async def fetch(name: str) -> str:
        """Fetch a value by name."""
        await release.wait()
        return f"value of {name}"

    wf = LLMCompilerWorkflow(
        tools=[fetch, combine],
        llm=scripted(),
        timeout=60,
        tool_policies={"fetch": ToolPolicy(side_effect="pure", resource_keys=("source",))},
    )
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        await page.goto(url + "/")
        await page.fill("#question", "alpha and beta?")
        await page.click("#go")
        await page.wait_for_selector('#dag .node.waiting[data-task="2"]', timeout=15000)
        note = await page.text_content('#dag .node[data-task="2"] .note')
        assert note is not None and "key:source" in note
        assert await page.locator("#dag .node.running").count() == 1
        # the wait grows on the timeline while it lasts
        await page.wait_for_selector('#gantt .wait-span[data-task="2"]', timeout=15000)
        release.set()
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        await page.click('#dag .node[data-task="2"]')
        details = await page.text_content("#details")
        assert details is not None and "Waited for a slot" in details
        wait = page.locator('#gantt .wait-span[data-task="2"]')
        assert "key:source" in (await wait.locator("title").text_content() or "")
    finally:
        await page.close()
        await stop(server)


async def test_retries_are_marked_on_the_timeline(browser):  # noqa: F811
    tries: dict[str, int] = {}

    async def fetch(name: str) -> str:
        """Fetch a value by name; fails on the first try of each name."""
        tries[name] = tries.get(name, 0) + 1
        if tries[name] == 1:
            raise ConnectionError(f"{name}: connection reset")
        return f"value of {name}"

    wf = LLMCompilerWorkflow(
        tools=[fetch, combine],
        llm=scripted(),
        timeout=60,
        tool_policies={"fetch": ToolPolicy(side_effect="pure", retry={"attempts": 3})},
    )
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        await page.goto(url + "/")
        await page.fill("#question", "alpha and beta?")
        await page.click("#go")
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        marks = page.locator('#gantt .try-mark[data-try="2"]')
        assert await marks.count() == 2  # one per fetch: its second try
        title = await marks.first.locator("title").text_content()
        assert title is not None and "try 2 of 3" in title and "connection reset" in title
        assert await page.locator("#gantt .try-mark").count() == 2  # no third try
    finally:
        await page.close()
        await stop(server)


async def test_a_task_held_before_its_plan_completes_is_what_the_status_says(browser, tmp_path):  # noqa: F811
    plan = '1. combine("a", "b")\n2. join()<END_OF_PLAN>'
    wf = LLMCompilerWorkflow(
        tools=[combine],
        llm=scripted([plan]),
        timeout=60,
        tool_policies={"combine": ToolPolicy(requires_approval=True)},
    )
    url, server, _ = await start_server(lambda: build_app({"compiler": wf}))
    page = await browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        await page.goto(url + "/")
        await page.fill("#question", "a and b?")
        await page.click("#go")
        await page.wait_for_selector('#dag .node.held[data-task="1"]', timeout=15000)
        await page.wait_for_selector("#dag .node.join", timeout=15000)  # the plan is complete
        status = await page.text_content("#status")
        assert status == (
            "Task 1 (combine) waits for your approval (click it); "
            "nothing else can run until you answer."
        ), status
        await page.screenshot(path=str(tmp_path / "held.png"), full_page=True)
        await page.click('#dag .node[data-task="1"]')
        await page.click('#details button[data-verdict="approve"]')
        await page.wait_for_selector("#answer:not([hidden])", timeout=15000)
        assert await page.text_content("#status") == "Done"
        await page.screenshot(path=str(tmp_path / "done.png"), full_page=True)
    finally:
        await page.close()
        await stop(server)
