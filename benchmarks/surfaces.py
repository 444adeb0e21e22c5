"""What a protocol surface adds to a served run: the same runs asked over the native API
and over each surface, side by side, on one server.

``python -m benchmarks.surfaces [--rounds N]``

One server (memory store) serves a scripted model planning three 20 ms tools. Each round
asks one question on every surface, in a shuffled order, one at a time, and times it from
the request to the answer in the client's hands:

* ``native``: ``POST /workflows/compiler/run-nowait``, then its SSE stream to the
  ``StopEvent`` (``after_sequence=-1``);
* ``openai-chat`` / ``openai-responses``: the ``openai`` client, not streamed;
* ``mcp``: the ``mcp`` client's ``call_tool`` on an open session;
* ``a2a``: the ``a2a-sdk`` client's ``SendMessage`` (not streamed).

Writes ``benchmarks/results/surfaces.json``: per surface the median and p90 in ms and
the median's ratio to the native one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from benchmarks.serving import percentile, started

QUESTION = "What are a, b and c?"
ANSWER = "a, b and c"
Ask = Callable[[], Awaitable[str]]


async def native(http: httpx.AsyncClient, url: str) -> str:
    r = await http.post(
        f"{url}/workflows/compiler/run-nowait", json={"start_event": {"user_msg": QUESTION}}
    )
    handler_id = r.json()["handler_id"]
    params = {"after_sequence": "-1"}
    async with http.stream("GET", f"{url}/events/{handler_id}", params=params) as events:
        async for line in events.aiter_lines():
            if line.startswith("data: ") and '"StopEvent"' in line:
                return str(json.loads(line[6:])["value"]["result"]["response"]["blocks"][0]["text"])
    raise RuntimeError("The run's stream ended without its StopEvent.")


async def surfaces(http: httpx.AsyncClient, url: str, stack: list) -> dict[str, Ask]:
    """One asking function per surface (clients opened once, outside the timing)."""
    from a2a.client import A2ACardResolver
    from a2a.client.client import ClientConfig
    from a2a.client.client_factory import ClientFactory
    from a2a.helpers import get_artifact_text
    from a2a.types import Message, Part, Role, SendMessageRequest
    from mcp import Client
    from openai import AsyncOpenAI

    openai = AsyncOpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0)
    stack.append(openai.close)
    mcp = Client(f"{url}/mcp")
    await mcp.__aenter__()
    stack.append(lambda: mcp.__aexit__(None, None, None))
    card = await A2ACardResolver(http, url).get_agent_card()
    a2a = ClientFactory(ClientConfig(streaming=False, httpx_client=http)).create(card)
    stack.append(a2a.close)
    messages = [{"role": "user", "content": QUESTION}]

    async def chat() -> str:
        reply = await openai.chat.completions.create(model="compiler", messages=messages)
        return reply.choices[0].message.content or ""

    async def responses() -> str:
        return (await openai.responses.create(model="compiler", input=QUESTION)).output_text

    async def tool() -> str:
        result = await mcp.call_tool("compiler", {"question": QUESTION})
        return str(result.content[0].text)  # type: ignore[union-attr]

    async def agent() -> str:
        part = Part(text=QUESTION)
        message = Message(role=Role.ROLE_USER, parts=[part], message_id=uuid.uuid4().hex)
        async for update in a2a.send_message(SendMessageRequest(message=message)):
            if update.HasField("task") and update.task.artifacts:
                return get_artifact_text(update.task.artifacts[0])
        return ""

    return {
        "native": lambda: native(http, url),
        "openai-chat": chat,
        "openai-responses": responses,
        "mcp": tool,
        "a2a": agent,
    }


async def measure(rounds: int) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {}
    async with started() as url, httpx.AsyncClient(timeout=60) as http:
        stack: list[Callable[[], Awaitable[object]]] = []
        try:
            asks = await surfaces(http, url, stack)
            for ask in asks.values():  # one warm-up run each
                assert ANSWER in await ask()
            for _ in range(rounds):
                order = list(asks)
                random.shuffle(order)
                for name in order:
                    start = time.perf_counter()
                    answer = await asks[name]()
                    times.setdefault(name, []).append(time.perf_counter() - start)
                    assert ANSWER in answer, (name, answer)
        finally:
            for close in reversed(stack):
                await close()
    base = statistics.median(times["native"])
    return {
        name: {
            "median_ms": round(1000 * statistics.median(t), 1),
            "p90_ms": round(1000 * percentile(t, 0.9), 1),
            "ratio_to_native": round(statistics.median(t) / base, 3),
        }
        for name, t in times.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    result = asyncio.run(measure(args.rounds))
    out = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_1min": round(load, 2),
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "surfaces": result,
    }
    path = Path(__file__).with_name("results") / "surfaces.json"
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))  # noqa: T201


if __name__ == "__main__":
    main()
