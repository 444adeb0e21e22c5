"""Compilers calling compilers: one served compiler uses another as a tool, over A2A and
over MCP at once, and a call held for approval in the inner one reaches the outer client.

Run: ``.venv/bin/python examples/compilers_calling_compilers.py`` (offline: scripted
planners and joiners write the plans below, so it needs no model; ``--reject`` rejects
the payment instead of approving it).

The inner compiler (its own server) has a rate lookup and a payment that requires
approval. The outer compiler (another server) has two tools that ask the inner one, one
over A2A, one over MCP (:mod:`llm_compiler.tools.remote`), and plans::

    1. ask_over_a2a("Pay ACME 120 EUR")          the inner plan: rate("EUR"), pay(...)
    2. ask_over_mcp("What are the EUR and USD rates?")   rate("EUR"), rate("USD")
    3. join()

Both outer tasks run at once, and each inner plan runs its calls in parallel. The inner
payment is held: the A2A tool writes a ``RemoteApprovalRequest`` to the outer run's
stream, the outer client (this script, reading the outer server's event stream) answers
it on the inner server (``answer_remote``), and the outer task gets the inner answer.
Meanwhile the MCP task has finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.serving import build_app, serve
from llm_compiler.serving.server import bound_socket
from llm_compiler.testing import LLMCall, ScriptedLLM
from llm_compiler.tools.remote import (
    RemoteApprovalRequest,
    a2a_agent_tool,
    answer_remote,
    mcp_agent_tool,
)

JOINER = "Answer a question from the results of a plan"
PAY, RATES = "Pay ACME 120 EUR", "What are the EUR and USD rates?"
OUTER_PLAN = f'1. ask_over_a2a("{PAY}")\n2. ask_over_mcp("{RATES}")\n3. join()<END_OF_PLAN>'
#: Seconds a rate lookup takes (the inner calls overlap).
LATENCY = 0.2


async def rate(currency: str) -> str:
    """The exchange rate of a currency to USD."""
    await asyncio.sleep(LATENCY)
    return {"EUR": "1.08", "USD": "1.00"}.get(currency, "unknown")


def pay(account: str, amount: int) -> str:
    """Pay an amount in EUR to an account."""
    return f"paid {amount} EUR to {account}"


def inner() -> LLMCompilerWorkflow:
    """The inner compiler: rate lookups, and a payment that waits for a human."""

    def reply(call: LLMCall) -> str:
        if JOINER in call.prompt:
            paid = "paid 120 EUR to ACME" in call.prompt
            return "Thought: done.\nAction: Finish(" + (
                "ACME was paid 120 EUR.)" if paid else "EUR is 1.08 USD; USD is 1.00.)"
            )
        if PAY in call.prompt:
            return '1. rate("EUR")\n2. pay("ACME", 120)\n3. join()<END_OF_PLAN>'
        return '1. rate("EUR")\n2. rate("USD")\n3. join()<END_OF_PLAN>'

    return LLMCompilerWorkflow(
        tools=[rate, pay],
        llm=ScriptedLLM(reply),
        timeout=120,
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
    )


def outer(inner_url: str, plan: str = OUTER_PLAN) -> LLMCompilerWorkflow:
    """The outer compiler: the inner one over A2A and over MCP, planning `plan`."""
    tools = [
        a2a_agent_tool(inner_url, "ask_over_a2a", "Ask the finance agent (A2A) a question."),
        mcp_agent_tool(
            f"{inner_url}/mcp", "compiler", "ask_over_mcp", "Ask the finance agent (MCP)."
        ),
    ]

    def reply(call: LLMCall) -> str:
        if JOINER in call.prompt:
            return "Thought: both answered.\nAction: Finish(Both agents answered.)"
        return plan

    return LLMCompilerWorkflow(tools=tools, llm=ScriptedLLM(reply), timeout=120)


@asynccontextmanager
async def served(workflow: LLMCompilerWorkflow) -> AsyncIterator[str]:
    """`workflow` served on 127.0.0.1 (a free port); yields its URL."""
    sock = bound_socket("127.0.0.1", 0)
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    app = build_app({"compiler": workflow})
    task = asyncio.create_task(serve(app, sock=sock, on_ready=ready.set_result, stop=stop))
    try:
        yield (await ready).rstrip("/")
    finally:
        stop.set()
        await task


async def ask_outer(url: str, verdict: str) -> list[dict[str, Any]]:
    """Ask the outer server, answer what it surfaces, and return its events."""
    events: list[dict[str, Any]] = []
    answers: list[asyncio.Task[None]] = []
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        body = {"start_event": {"user_msg": "Pay ACME and look up the rates."}}
        handler_id = (await http.post("/workflows/compiler/run-nowait", json=body)).json()[
            "handler_id"
        ]
        params = {"after_sequence": "-1"}
        async with http.stream("GET", f"/events/{handler_id}", params=params) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data: "):
                    continue
                event = json.loads(line[6:])
                events.append(event)
                if event["type"] == "RemoteApprovalRequest":
                    held = RemoteApprovalRequest.model_validate(event["value"])
                    print(f"held in the inner run: {held.tool}({held.args}), answering {verdict}")  # noqa: T201
                    answers.append(asyncio.create_task(answer_remote(held, verdict)))  # type: ignore[arg-type]
    await asyncio.gather(*answers)
    return events


async def main(verdict: str = "approve", plan: str = OUTER_PLAN) -> list[dict[str, Any]]:
    """Serve both compilers, ask the outer one (planning `plan`), and return the outer
    run's events."""
    async with served(inner()) as inner_url, served(outer(inner_url, plan)) as outer_url:
        events = await ask_outer(outer_url, verdict)
    for event in events:
        value = event["value"]
        if event["type"] == "TaskResult":
            print(f"task {value['task_id']} {value['tool_name']}: {value['output']}")  # noqa: T201
    return events


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reject", action="store_true", help="reject the payment")
    asyncio.run(main("reject" if parser.parse_args().reject else "approve"))
