"""In real Chromium: another site cannot start a run; the page works with a token.

Skipped, with the reason, where no Chromium is installed (``make install-browser``).
"""

from __future__ import annotations

import httpx
import pytest

from llm_compiler.serving import ServedApp, build_app
from llm_compiler.serving.security import SecurityPolicy

from .conftest import ANSWER, start_server, stop, workflow
from .test_browser import browser  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)

TOKEN = "page-token-0123456789abcdef"

ATTACK = """<!doctype html><title>a page on another site</title>
<form id="form" method="POST" enctype="text/plain" target="sink"
      action="TARGET/workflows/compiler/run-nowait">
  <input name='{"start_event": {"user_msg": "form?", "x": "' value='"}}'>
</form>
<iframe name="sink"></iframe>
<script>
const body = JSON.stringify({ start_event: { user_msg: "pwned?" } });
const attempts = [
  { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body },
  { method: "POST", mode: "cors", headers: { "content-type": "application/json" }, body },
  { method: "POST", mode: "no-cors", body: new URLSearchParams({ q: "x" }) },
];
window.results = [];
(async () => {
  for (const options of attempts) {
    try {
      const r = await fetch("TARGET/workflows/compiler/run-nowait", options);
      window.results.push(`${r.type}:${r.status}`);
    } catch (e) {
      window.results.push(`error:${e.message}`);
    }
  }
  document.getElementById("form").submit();
  window.results.push("form");
})();
</script>"""


class Recorder:
    """ASGI wrapper noting each request that reaches the server (method, path, origin)."""

    def __init__(self, app) -> None:
        self.app = app
        self.seen: list[tuple[str, str, str | None]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            origin = dict(scope["headers"]).get(b"origin")
            self.seen.append((scope["method"], scope["path"], origin and origin.decode()))
        await self.app(scope, receive, send)


def html_app(html: str):
    """An ASGI app answering every request with one HTML page."""

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/html")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": html.encode()})

    return app


async def test_a_page_on_another_origin_cannot_start_a_run(browser, overlap):  # noqa: F811
    recorder: Recorder | None = None

    def factory():
        nonlocal recorder
        served = build_app({"compiler": workflow(overlap)})
        served.app = recorder = Recorder(served.app)
        return served

    url, server, _ = await start_server(factory)
    # The attacking site: another origin (another port) on the same machine.
    page_app = html_app(ATTACK.replace("TARGET", url))
    evil_url, evil, _ = await start_server(lambda: ServedApp(app=page_app, server=None))
    page = await browser.new_page()
    try:
        await page.goto(evil_url + "/")
        await page.wait_for_function("window.results.length === 4", timeout=20000)
        results = await page.evaluate("window.results")
        # The form posts into the iframe: wait until the server has answered it.
        await page.wait_for_function(
            "(() => { try { return frames[0].location.href !== 'about:blank'; }"
            " catch (e) { return true; } })()",
            timeout=20000,
        )
        async with httpx.AsyncClient(base_url=url, timeout=20) as c:
            handlers = (await c.get("/handlers")).json()["handlers"]
    finally:
        await page.close()
        await stop(evil)
        await stop(server)
    assert handlers == [], results  # nothing started
    posts = [s for s in recorder.seen if s[0] == "POST"]
    # The attacks reached the server (the browser did not stop them): the server refused them.
    assert len(posts) >= 3 and all(origin == evil_url for _, _, origin in posts), recorder.seen
    assert "cors:200" not in results


async def test_the_page_works_with_a_token_given_once(browser, overlap):  # noqa: F811
    policy = SecurityPolicy.build(token=TOKEN)
    url, server, _ = await start_server(
        lambda: build_app({"compiler": workflow(overlap)}, policy=policy)
    )
    page = await browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        await page.goto(url + f"/#token={TOKEN}")
        await page.wait_for_function("document.querySelector('#question').value !== ''")
        assert "token" not in page.url  # dropped from the address bar and history
        await page.fill("#question", "alpha and beta?")
        await page.click("#go")
        await page.wait_for_selector("#answer:not([hidden])", timeout=20000)
        assert (await page.text_content("#answer")) == ANSWER
        assert await page.locator("#dag .node.done").count() == 3  # the stream came through
        async with page.context.expect_page() as opened:  # the Mermaid link, with the token
            await page.click("#mermaid")
        chart = await opened.value
        await chart.wait_for_load_state()
        assert (await chart.text_content("body")).startswith("flowchart LR")
        await chart.close()
        await page.reload()  # the tab keeps the token: the run replays from its stream
        await page.wait_for_selector("#answer:not([hidden])", timeout=20000)
        assert (await page.text_content("#answer")) == ANSWER
        # A fresh tab without the token gets a clear message, and no data.
        other = await browser.new_page()
        await other.goto(url + "/")
        await other.wait_for_selector("#error:not([hidden])", timeout=20000)
        assert "token" in await other.text_content("#error")
        await other.close()
        assert errors == []
    finally:
        await page.close()
        await stop(server)
