"""A served compiler whose model and tools can stop at a chosen point, for kill -9 tests.

``llm-compiler serve --workflow tests.durable.crash_app:make``. Environment:

* ``LLMC_CALLS``: a file; every model and tool call appends a line (``pid kind what``), so a
  test counts what ran, across processes.
* ``LLMC_CRASH_AT``: ``plan`` (mid-stream of the plan), ``schedule`` (inside the schedule
  step, right after task 3 was admitted and marked running), ``tool`` (tool 3 in flight) or
  ``joiner`` (mid-stream of the joiner's answer). There the process appends
  ``blocked <point>`` and waits forever, for the test to kill it.
* ``LLMC_KEYS``: a file; every tool call appends its idempotency key and pid (``key pid
  what``), so a test tells which call of which run ran twice.
* ``LLMC_UNDECLARED``: names of tools that declare no side-effect class (the default,
  ``at_most_once``); the others are ``pure`` (run again after a crash).
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from llm_compiler import LLMCompilerWorkflow, idempotency_key
from llm_compiler.testing import LLMCall, ScriptedLLM

PLAN = (
    '1. fetch("alpha")\n2. fetch("beta")\n3. slow("gamma")\n4. combine("$1", "$3")\n'
    "5. join()<END_OF_PLAN>"
)
ANSWER = "alpha, beta and gamma"
JOINER_MARK = "Answer a question from the results of a plan"


def note(kind: str, what: str) -> None:
    with open(os.environ["LLMC_CALLS"], "a") as f:
        f.write(f"{os.getpid()} {kind} {what}\n")
    keys = os.environ.get("LLMC_KEYS")
    if keys and kind == "tool":
        with open(keys, "a") as f:
            f.write(f"{idempotency_key()} {os.getpid()} {what}\n")


async def stop_here(point: str) -> None:
    if os.environ.get("LLMC_CRASH_AT") == point:
        note("blocked", point)
        await asyncio.Event().wait()


async def fetch(name: str) -> str:
    """Fetch a value by name."""
    note("tool", f"fetch:{name}")
    return f"value of {name}"


async def slow(name: str) -> str:
    """Fetch a value that takes a while (``LLMC_SLOW_SECONDS``, 0 by default)."""
    note("tool", f"slow:{name}")
    await stop_here("tool")
    await asyncio.sleep(float(os.environ.get("LLMC_SLOW_SECONDS", "0")))
    return f"slow value of {name}"


def combine(a: str, b: str) -> str:
    """Combine two values."""
    note("tool", "combine")
    return f"{a} + {b}"


class CrashingLLM(ScriptedLLM):
    """Streams the plan or the answer; stops mid-stream at the chosen point."""

    async def on_chunk(self, index: int, chunk: str) -> None:
        if index == 3:  # past the first three tasks of the plan, or mid-answer
            joiner = JOINER_MARK in self.calls[-1].prompt
            await stop_here("joiner" if joiner else "plan")


def reply(call: LLMCall) -> str:
    if JOINER_MARK in call.prompt:
        note("llm", "joiner")
        return f"Thought: All values are here.\nAction: Finish({ANSWER})"
    note("llm", "planner")
    return PLAN


class HeldCompiler(LLMCompilerWorkflow):
    """Stops inside the schedule step right after the facts that dispatch task 3 are written
    (LLMC_CRASH_AT=schedule), before anything is emitted."""

    def _emit(self, ctx: Any, state: Any, decision: Any) -> None:
        if os.environ.get("LLMC_CRASH_AT") == "schedule" and any(
            t.id == 3 for t, _ in decision.dispatch
        ):
            note("blocked", "schedule")
            while True:  # blocking the loop is the point: the step must not get past here
                time.sleep(3600)
        super()._emit(ctx, state, decision)


def make() -> LLMCompilerWorkflow:
    undeclared = os.environ.get("LLMC_UNDECLARED", "").split(",")
    pure = [name for name in ("fetch", "slow", "combine") if name not in undeclared]
    return HeldCompiler(
        tools=[fetch, slow, combine],
        tool_policies={name: {"side_effect": "pure"} for name in pure},
        llm=CrashingLLM(reply, tokens_per_chunk=2),
        timeout=120,
    )
