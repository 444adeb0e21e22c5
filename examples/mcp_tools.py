"""Answer a question with tools from an MCP server, called in parallel by the compiler.

Run: ``make demo-mcp`` (or ``.venv/bin/python examples/mcp_tools.py "your question"``).
``--http`` starts the server over streamable HTTP on loopback instead of stdio;
``--server "COMMAND"`` or ``--server URL`` uses your own MCP server.

The server is the project's own (``python -m llm_compiler.demo.mcp_server``: the demo's
encyclopedia ``search``/``lookup`` and ``calculator``, served by the official MCP SDK in a
subprocess). The compiler opens one session to it, lists its tools and runs each planned
call as soon as its inputs exist; results come back typed (``lookup("K2", "height_m")``
is the number 8611.0), so ``calculator("$1 - $2")`` receives numbers. The model is the
one ``make demo`` uses (the embedded Gemma 3 270M unless ``OPENAI_API_KEY`` or
``LLM_COMPILER_API_BASE`` is set).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from llama_index.core.agent.workflow import AgentStream

from demo import Printer  # examples/demo.py: prints events as they arrive
from llm_compiler import LLMCompilerError, LLMCompilerWorkflow, TaskResult, tools_from_mcp
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models.resolve import resolve_llm

QUESTION = "How much higher is Mount Everest than K2?"
SERVER = [sys.executable, "-m", "llm_compiler.demo.mcp_server"]
# Each lookup takes as long as a web request would, so the parallel calls show.
LATENCY = os.environ.get("DEMO_TOOL_LATENCY", "1.5")


@asynccontextmanager
async def http_server() -> AsyncIterator[str]:
    """The demo MCP server over streamable HTTP on a free loopback port: its URL."""
    env = {**os.environ, "DEMO_TOOL_LATENCY": LATENCY}
    process = await asyncio.create_subprocess_exec(
        *SERVER, "--http", stdout=subprocess.PIPE, env=env
    )
    try:
        assert process.stdout is not None
        url = (await asyncio.wait_for(process.stdout.readline(), 60)).decode().strip()
        if not url.startswith("http"):
            raise LLMCompilerError(f"The demo MCP server did not start (it printed {url!r}).")
        yield url
    finally:
        process.terminate()
        await process.wait()


async def answer(question: str, server: str | list[str]) -> None:
    """Plan and run `question` over the MCP server's tools, printing events live."""
    resolved = resolve_llm()
    print(f"model: {resolved.description}")
    async with tools_from_mcp(server, env={"DEMO_TOOL_LATENCY": LATENCY}) as tools:
        print(f"MCP tools: {', '.join(t.metadata.name for t in tools)}")
        async with resolved as llm:
            workflow = LLMCompilerWorkflow(
                tools=tools,
                llm=llm,
                max_replans=1,
                tool_timeout=30,
                # The demo server's tools are the demo's: its few-shot examples fit.
                planner_examples=demo_tools.PLANNER_EXAMPLES,
                joiner_examples=demo_tools.JOINER_EXAMPLES,
                timeout=300,
            )
            printer = Printer()
            handler = workflow.run(user_msg=question)
            async for ev in handler.stream_events():
                if not isinstance(ev, AgentStream):
                    printer.event(ev)
                if isinstance(ev, TaskResult) and not ev.is_error:
                    printer.say(f"       value of task {ev.task_id}: {ev.output!r}")
            result = await handler
    print(f"\nanswer: {result}")
    print(f"total {printer.now():.1f}s; up to {printer.parallelism()} MCP calls at once")


async def main(question: str, server: str | None, http: bool) -> int:
    print(f"question: {question}")
    if server is not None:
        await answer(question, server)
    elif http:
        async with http_server() as url:
            print(f"MCP server: {url}")
            await answer(question, url)
    else:
        print(f"MCP server: {' '.join(SERVER)} (stdio)")
        await answer(question, SERVER)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="*", help="the question (default: a sample one)")
    parser.add_argument("--http", action="store_true", help="serve the demo tools over HTTP")
    parser.add_argument("--server", help="your MCP server: a command line or a URL")
    args = parser.parse_args()
    try:
        sys.exit(asyncio.run(main(" ".join(args.question) or QUESTION, args.server, args.http)))
    except LLMCompilerError as e:
        print(f"error: {e.message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
