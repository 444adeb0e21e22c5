"""A durable run on SQLite, for tests that kill it with SIGKILL and run it again.

Usage: ``python kill_app.py DIR CRASH [BACKEND]``. BACKEND is ``journal`` (default:
:func:`llm_compiler.durable.durable_runtime`, the fact journal) or ``server``
(llama-agents-server's SQLite workflow store, which resumes runs from its tick journal and
state row when it starts). CRASH is one of
``none``, ``tool`` (the slow
tool signals, writing DIR/ready, then blocks until the test kills the process),
``policy`` and ``default`` (as ``tool``, with ``slow`` declared ``at_most_once``, or
declaring nothing; the other tools are ``pure``), ``plan`` (killed while the plan streams,
after tasks 1 and 2 finished), ``schedule`` (killed inside the scheduler step right after
it wrote the facts that dispatch task 3, before it emitted anything), ``join`` (killed
while the joiner streams).

Every tool call and LLM call appends a line to DIR/calls.log (flushed and synced before
the process can die); the answer and the task outputs are printed as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.durable import at_most_once, durable_runtime
from llm_compiler.engine.scheduler import Decision
from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.summary import CompilerOutput
from llm_compiler.testing import LLMCall, ScriptedLLM

DIR = Path(sys.argv[1])
CRASH = sys.argv[2]
BACKEND = sys.argv[3] if len(sys.argv) > 3 else "journal"
RUN_ID = "durable-run-1"
QUESTION = "Look up a and b, then combine them."
PLAN = '1. lookup("a")\n2. lookup("b")\n3. slow($1)\n4. lookup($2)\n5. join()'
ANSWER = "Thought: I have both.\nAction: Finish(A and B combined)"


def log(line: str) -> None:
    with open(DIR / "calls.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def logged() -> list[str]:
    path = DIR / "calls.log"
    return path.read_text().splitlines() if path.exists() else []


async def lookup(x: str) -> str:
    """Look up x."""
    log(f"start lookup {x}")
    log(f"done lookup {x}")
    return x.upper()


async def slow(x: str) -> str:
    """Combine x, slowly."""
    if CRASH == "once" or CRASH == "none-once":
        await at_most_once()  # committed before the call's effect
    log(f"start slow {x}")
    if CRASH in ("tool", "once", "policy", "default"):
        (DIR / "ready").write_text("started")
        await asyncio.Event().wait()  # until the test kills this process
    log(f"done slow {x}")
    return f"<{x}>"


class Retriever:
    """Chooses no extra tool; counts its calls (one per question, whatever the store)."""

    async def aretrieve(self, query: str) -> list[Any]:
        log("retrieve")
        return []


class App(ScriptedLLM):
    """The planner's and the joiner's scripted replies; kills the process mid-stream."""

    phase: str = ""

    def __init__(self) -> None:
        super().__init__(self.script)

    def script(self, call: LLMCall) -> str:
        self.phase = "joiner" if "Action: Finish(" in call.prompt else "planner"
        log(f"llm {self.phase}")
        return ANSWER if self.phase == "joiner" else PLAN

    async def on_chunk(self, index: int, chunk: str) -> None:
        if CRASH == "plan" and self.phase == "planner" and "slow" in chunk:
            # Tasks 1 and 2 are admitted and ran; give their results time to be journaled.
            while sum(line.startswith("done lookup") for line in logged()) < 2:
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.0)
            die()
        if CRASH == "join" and self.phase == "joiner" and index == 3:
            die()


class Workflow(LLMCompilerWorkflow):
    def _emit(self, ctx: Any, state: CompilerState, decision: Decision) -> None:
        if CRASH == "schedule" and any(t.id == 3 for t, _ in decision.dispatch):
            die()  # its facts are written; nothing is emitted
        super()._emit(ctx, state, decision)


def policies() -> dict[str, Any]:
    """The tools' side-effect classes: both ``pure`` (run again after a crash), unless the
    crash is ``policy`` (``slow`` declared ``at_most_once``) or ``default`` (``slow``
    declares nothing: the default class, ``at_most_once``). Kept for the next start."""
    if CRASH in ("policy", "default"):
        (DIR / "policy").write_text(CRASH)
    mode = (DIR / "policy").read_text() if (DIR / "policy").exists() else "pure"
    out: dict[str, Any] = {"lookup": {"side_effect": "pure"}}
    if mode != "default":
        out["slow"] = {"side_effect": "at_most_once" if mode == "policy" else "pure"}
    return out


def workflow(**options: Any) -> Workflow:
    options["tool_policies"] = policies()
    return Workflow(
        tools=[lookup, slow],
        llm=App(),
        tool_retriever=Retriever(),  # type: ignore[arg-type]
        timeout=120,
        **options,
    )


def report(out: Any) -> None:
    outputs = {t.id: t.output for t in out.summary.tasks}
    print(json.dumps({"answer": str(out), "outputs": outputs}), flush=True)


async def on_journal() -> None:
    runtime = durable_runtime(f"sqlite:///{DIR / 'runs.sqlite'}")
    wf = workflow(runtime=runtime, workflow_name="llmc_kill_test")
    await runtime.launch()
    try:
        report(await wf.run(user_msg=QUESTION, run_id=RUN_ID))
    finally:
        await runtime.destroy()


async def on_server_store() -> None:
    from llama_agents.server import SqliteWorkflowStore
    from llama_agents.server._store.abstract_workflow_store import HandlerQuery
    from llama_agents.server.runtime import _DurableWorkflowRuntime

    store = SqliteWorkflowStore(str(DIR / "server.sqlite"))
    runtime = _DurableWorkflowRuntime(workflow_store=store, idle_timeout=None)
    runtime.add_workflow("llmc", workflow())
    await runtime.start()  # resumes the run a killed process left, from its journal
    try:
        query = HandlerQuery(handler_id_in=[RUN_ID])
        if not await store.query(query):
            await runtime.run("llmc", handler_id=RUN_ID, user_msg=QUESTION)
        while (handler := (await store.query(query))[0]).status == "running":
            await asyncio.sleep(0.05)
        assert handler.status == "completed", handler
        assert handler.result is not None
        result = handler.result.result  # the CompilerOutput, as JSON
        if isinstance(result, dict):
            result = CompilerOutput.model_validate(result)
        report(result)
    finally:
        await runtime.stop()


if __name__ == "__main__":
    asyncio.run(on_journal() if BACKEND == "journal" else on_server_store())
