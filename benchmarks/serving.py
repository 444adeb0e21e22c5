"""Serving benchmarks: event-to-DOM delay of the live page, and server throughput.

``python -m benchmarks.serving [--runs N] [--concurrency C ...]``

* **Page delay**: Chromium shows a run of a scripted model with three short tools; for
  every task result, the page records (after updating the DOM) the delay from the
  tool's ``finished_at`` to that moment. Same machine, same clock. p50/p99 over runs.
* **Throughput**: C concurrent HTTP clients each start runs (``run-nowait``) and read
  their SSE streams to the end; completed runs per second, memory and SQLite stores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving import build_app, make_store, serve
from llm_compiler.serving.server import bound_socket
from llm_compiler.testing import LLMCall, ScriptedLLM

PLAN = '1. fetch("a")\n2. fetch("b")\n3. fetch("c")\n4. join()<END_OF_PLAN>'
FINISH = "Thought: done.\nAction: Finish(a, b and c)"
FLAGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]
NEW_RUN_DONE = (
    "([old]) => { const r = window.compilerPage.run; return r && r.id !== old && r.finished; }"
)


async def fetch(name: str) -> str:
    """A short I/O-bound tool."""
    await asyncio.sleep(0.02)
    return f"value of {name}"


def workflow() -> LLMCompilerWorkflow:
    def reply(call: LLMCall) -> str:
        return FINISH if "Answer a question from the results" in call.prompt else PLAN

    llm = ScriptedLLM(reply, tokens_per_chunk=4)
    return LLMCompilerWorkflow(tools=[fetch], llm=llm, max_replans=0, timeout=120)


@asynccontextmanager
async def started(store_spec: str = "memory") -> AsyncIterator[str]:
    """A server of :func:`workflow` on 127.0.0.1; yields its URL."""
    served = build_app({"compiler": workflow()}, store=make_store(store_spec))
    sock = bound_socket("127.0.0.1", 0)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(served, sock=sock, on_ready=ready.set_result, stop=stop))
    try:
        yield (await ready).rstrip("/")
    finally:
        stop.set()
        await task


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def page_delay(runs: int) -> dict[str, float] | None:
    """Event-to-DOM delays (ms) over `runs` runs asked through the page."""
    chromium = shutil.which("chromium")
    if chromium is None:
        print("page delay: skipped (no chromium; make install-browser)")
        return None
    from playwright.async_api import async_playwright

    delays: list[float] = []
    async with started() as url, async_playwright() as p:
        browser = await p.chromium.launch(executable_path=chromium, args=FLAGS)
        page = await browser.new_page()
        await page.goto(url + "/")
        for i in range(runs):
            previous = await page.evaluate("window.compilerPage.run && window.compilerPage.run.id")
            await page.fill("#question", f"question {i}")
            await page.click("#go")
            await page.wait_for_function(NEW_RUN_DONE, arg=[previous])
            delays += await page.evaluate("window.compilerPage.latencies.splice(0)")
        await browser.close()
    ms = [d * 1000 for d in delays]
    return {"n": len(ms), "p50_ms": statistics.median(ms), "p99_ms": percentile(ms, 0.99)}


async def one_run(client: httpx.AsyncClient, i: int) -> None:
    r = await client.post(
        "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": f"q{i}"}}
    )
    r.raise_for_status()
    handler_id = r.json()["handler_id"]
    params = {"after_sequence": -1}
    async with client.stream("GET", f"/events/{handler_id}", params=params) as stream:
        last = ""
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                last = line
    if '"type":"StopEvent"' not in last:
        raise RuntimeError(f"run {handler_id} did not finish: {last[:200]}")


async def throughput(concurrency: int, total: int, store_spec: str) -> float:
    """Completed runs per second with `concurrency` clients."""
    queue = iter(range(total))
    async with started(store_spec) as url, httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def worker() -> None:
            for i in queue:
                await one_run(client, i)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return total / (time.perf_counter() - start)


async def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serving", description=__doc__)
    parser.add_argument("--runs", type=int, default=20, help="page runs for the delay")
    parser.add_argument("--total", type=int, default=60, help="runs per throughput point")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 30])
    args = parser.parse_args(argv)
    results: dict[str, object] = {}
    delay = await page_delay(args.runs)
    if delay is not None:
        results["page_delay"] = delay
        print(
            f"page: event -> DOM update p50 {delay['p50_ms']:.1f} ms, "
            f"p99 {delay['p99_ms']:.1f} ms ({delay['n']:.0f} task results)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        for store in ("memory", f"sqlite:///{Path(tmp) / 'runs.db'}"):
            name = store.split(":")[0]
            for c in args.concurrency:
                rate = await throughput(c, args.total, store)
                results[f"throughput_{name}_c{c}"] = rate
                print(f"server ({name} store): {c:>3} concurrent clients -> {rate:.1f} runs/s")
    out = Path(__file__).parent / "results" / "serving.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
