"""Plans and joiner answers of the embedded model with and without grammars.

Run ``python -m benchmarks.grammar`` (needs ``make install-local``). For each question the
planner prompt goes to llama.cpp's ``/v1/completions`` twice, greedy: free, and under
:func:`~llm_compiler.dialects.grammar.plan_grammar`. A plan is *valid* when it parses without
errors, ends with ``join()``, and every call binds to a given tool with arguments of the
declared types; it is *right* when its calls are exactly the expected ones. The joiner
answers a finished round of the demo, free and under
:func:`~llm_compiler.dialects.grammar.joiner_grammar`: *valid* when it writes an ``Action:``
line, *right* when it finishes with both capitals. Timings exclude prompt processing
(the prompt is cached by a first, one-line request).
"""

from __future__ import annotations

import time
from typing import Any, Literal

import httpx
from llama_index.core.tools import BaseTool, FunctionTool

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import PlannerContext
from llm_compiler.dialects.grammar import joiner_grammar, plan_grammar
from llm_compiler.dialects.llmcompiler import PlanParser
from llm_compiler.dialects.llmcompiler.prompts import PlannerInput
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.dialects.thought_action import JoinerInput, parse_joiner_output
from llm_compiler.models import LocalLLMServer
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools import bind, to_tool, tool_map, validate_arguments

PLAN_STOP = [END_OF_PLAN, "\n###", "\nQuestion:"]
JOIN_STOP = ["<END_OF_RESPONSE>", "\n###", "\nQuestion:"]


def play(artist: str, duration: int) -> str:
    """Play songs by an artist for a number of minutes."""
    return artist


def get_weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather in a city."""
    return city


def area(base: float, height: float, unit: str = "cm") -> float:
    """Area of a triangle from its base and height."""
    return base * height / 2


SPOTIFY = FunctionTool.from_defaults(fn=play, name="spotify.play")
DEMO = demo_tools.TOOLS
MINUS = {"$concat": [{"$ref": 1}, " - ", {"$ref": 2}]}
# (name, tools, question, examples, expected calls: tool and the arguments that matter)
CASES: list[tuple[str, list[Any], str, str | None, list[tuple[str, dict[str, Any]]]]] = [
    ("bfcl-spotify", [SPOTIFY], "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes",
     None, [("spotify.play", {"artist": "Taylor Swift", "duration": 20}),
            ("spotify.play", {"artist": "Maroon 5", "duration": 15})]),
    ("weather-enum", [get_weather, SPOTIFY], "What is the weather in Paris and in Boston, in "
     "fahrenheit?", None, [("get_weather", {"city": "Paris", "unit": "fahrenheit"}),
                           ("get_weather", {"city": "Boston", "unit": "fahrenheit"})]),
    ("triangles", [area, get_weather], "Find the area of a triangle with base 10 and height 5, "
     "and of one with base 3 and height 4.", None,
     [("area", {"base": 10, "height": 5}), ("area", {"base": 3, "height": 4})]),
    ("demo-capitals", DEMO, "What are the capitals of France and Japan?",
     demo_tools.PLANNER_EXAMPLES,
     [("search", {"query": "France"}), ("search", {"query": "Japan"})]),
    ("demo-rivers", DEMO, "How much longer is the Nile than the Amazon?",
     demo_tools.PLANNER_EXAMPLES, [("lookup", {"name": "Nile", "field": "length_km"}),
                                   ("lookup", {"name": "Amazon", "field": "length_km"}),
                                   ("calculator", {"expression": MINUS})]),
]  # fmt: skip


def complete(base_url: str, prompt: str, grammar: str | None, stop: list[str]) -> dict[str, Any]:
    """One greedy completion; its text, token count and seconds."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": 200, "temperature": 0, "stop": stop}
    if grammar is not None:
        body["grammar"] = grammar
    started = time.monotonic()
    response = httpx.post(f"{base_url}/completions", json=body, timeout=600)
    response.raise_for_status()
    data = response.json()
    seconds = time.monotonic() - started
    text = data["choices"][0]["text"]
    return {"text": text, "tokens": data["usage"]["completion_tokens"], "seconds": seconds}


def judge(text: str, tools: list[BaseTool], expected: list[tuple[str, dict]]) -> tuple[bool, bool]:
    """Whether the plan is valid (runnable) and right (exactly the expected calls)."""
    parser = PlanParser()
    parser.feed(text)
    parser.finish()
    by_name = tool_map(tools)
    calls = []
    valid = not parser.errors and parser.joined
    for task in parser.tasks:
        if task.tool not in by_name:
            return False, False
        bound = bind(task, by_name[task.tool])
        if bound.error:
            return False, False
        try:
            if not bound.deps:
                validate_arguments(by_name[task.tool], bound.kwargs)
        except ValueError:
            valid = False
        calls.append((task.tool, bound.kwargs))
    right = len(calls) == len(expected) and all(
        tool == want_tool and all(kwargs.get(k) == v for k, v in want.items())
        for (tool, kwargs), (want_tool, want) in zip(calls, expected, strict=True)
    )
    return valid, valid and right


def plans(base_url: str) -> list[str]:
    """Table rows for every planning case, free and constrained."""
    rows = []
    for name, raw_tools, question, examples, expected in CASES:
        tools = [to_tool(t) for t in raw_tools]
        context = PlannerContext(prompt=PromptContext(question, chat=False), tools=tools)
        prompt = PlannerInput(context, examples).prompt()
        complete(base_url, prompt, None, ["\n"])  # warm the prompt cache: time generation
        for grammar in (None, plan_grammar(tools)):
            out = complete(base_url, prompt, grammar, PLAN_STOP)
            valid, right = judge(out["text"], tools, expected)
            rows.append(_row(name, grammar, out, f"{valid} | {right}", out["text"]))
    return rows


def joins(base_url: str) -> list[str]:
    """Table rows for the joiner on the demo's capitals round, free and constrained."""
    tasks = [
        TaskRecord(i, "search", f'{i}. search("{name}")', _entry(name))
        for i, name in enumerate(["France", "Japan"], 1)
    ]
    rows = []
    for last_round in (False, True):
        context = PromptContext(
            "What are the capitals of France and Japan?",
            rounds=[RoundRecord(tasks=tasks)],
            chat=False,
            last_round=last_round,
        )
        prompt = JoinerInput(context, demo_tools.JOINER_EXAMPLES).llm_request().prompt or ""
        complete(base_url, prompt, None, ["\n"])
        grammar = joiner_grammar(allow_replan=not last_round, thought_label=False)
        for g in (None, grammar):
            out = complete(base_url, prompt, g, JOIN_STOP)
            decision = parse_joiner_output("Thought:" + out["text"])
            has_action = "\nAction: " in out["text"]
            right = decision.action == "finish" and all(
                c in decision.content for c in ("Paris", "Tokyo")
            )
            name = "joiner-last-round" if last_round else "joiner"
            rows.append(_row(name, g, out, f"{has_action} | {right}", out["text"]))
    return rows


def _entry(name: str) -> str:
    entry = demo_tools.find_entry(name)
    assert entry is not None
    return f"{entry['title']}: {entry['text']}"


def _row(name: str, grammar: str | None, out: dict[str, Any], verdict: str, text: str) -> str:
    rate = out["tokens"] / out["seconds"] if out["seconds"] else 0.0
    shown = text.strip().replace("\n", " ⏎ ").replace("|", "\\|")
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return (
        f"| {name} | {'yes' if grammar else 'no'} | {verdict} | {out['tokens']} | "
        f"{out['seconds']:.1f} | {rate:.1f} | `{shown}` |"
    )


def main() -> None:
    """Print the table (Markdown)."""
    with LocalLLMServer() as server:
        rows = plans(server.base_url) + joins(server.base_url)
    print("| case | grammar | valid | right | tokens | s | tok/s | output |")  # noqa: T201
    print("|---|---|---|---|---|---|---|---|")  # noqa: T201
    print("\n".join(rows))  # noqa: T201


if __name__ == "__main__":
    main()
