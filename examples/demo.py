"""Answer a question with parallel tool calls, showing the compiler's events live.

Run: ``make demo`` (or ``.venv/bin/python examples/demo.py "your question"``). Chain-of-
Abstraction instead of LLMCompiler plans: ``make demo DIALECT=coa`` (or ``--dialect coa``).

The model comes from the environment (``llm_compiler.models.resolve.resolve_llm``): OpenAI with
``OPENAI_API_KEY``, any OpenAI-compatible server with ``LLM_COMPILER_API_BASE``, else the
embedded Gemma 3 270M on a local llama.cpp server that this script starts and stops. The
tools are offline: a small encyclopedia and a calculator (``demo_tools.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

from llama_index.core.agent.workflow import AgentStream

from llm_compiler import (
    ChainOfAbstractionWorkflow,
    CompilerStream,
    JoinEvent,
    LLMCompilerError,
    LLMCompilerWorkflow,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.demo import QUESTION, demo_compiler
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models.resolve import resolve_llm
from llm_compiler.plan import render_call

# A lookup takes as long as a web search API would, so independent lookups overlap even
# while a slow local model is still writing the plan.
demo_tools.LATENCY = float(os.environ.get("DEMO_TOOL_LATENCY", "1.5"))


class Printer:
    """Prints events as they arrive, stamped with seconds since the start."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.first_start: float | None = None
        self.plan_done: float | None = None
        self.spans: list[tuple[float, float]] = []
        self.writing: set[tuple[str, int]] = set()
        """The (phase, round) pairs whose model has sent its first token."""

    def now(self) -> float:
        return time.perf_counter() - self.t0

    def say(self, text: str) -> None:
        print(f"[{self.now():6.2f}s] {text}", flush=True)

    def first_token(self, ev: CompilerStream) -> None:
        """Say when the model, done reading its prompt, writes a round's plan or answer."""
        if (ev.phase, ev.round) in self.writing:
            return
        self.writing.add((ev.phase, ev.round))
        what = "its plan" if ev.phase == "plan" else "the answer"
        self.say(f"model  read its prompt; writing {what} (round {ev.round})")

    def event(self, ev: object) -> None:  # noqa: C901 - one branch per event type
        if isinstance(ev, CompilerStream):
            self.first_token(ev)
        elif isinstance(ev, AgentStream):
            pass
        elif isinstance(ev, PlanEvent) and not ev.complete:
            for task in ev.tasks:
                note = f"   !! {task.error}" if task.error else ""
                self.say(f"plan   {task.text}{note}")
        elif isinstance(ev, PlanEvent):
            if self.plan_done is None:
                self.plan_done = self.now()
            extra = "".join(f"\n           plan error: {e}" for e in ev.errors)
            self.say(f"plan complete: {len(ev.tasks)} task(s) in round {ev.round}{extra}")
        elif isinstance(ev, TaskReady):
            if self.first_start is None:
                self.first_start = self.now()
            args = ", ".join(f"{k}={v!r}" for k, v in ev.args.items())
            self.say(f"start  {ev.task_id}. {ev.tool_name}({args})")
        elif isinstance(ev, TaskResult):
            status = "skipped" if ev.skipped else "error" if ev.is_error else "done"
            if ev.duration:
                self.spans.append((ev.started_at, ev.finished_at))
            self.say(f"{status:6} {ev.task_id}. in {ev.duration:.2f}s -> {str(ev.output)[:90]}")
        elif isinstance(ev, JoinEvent):
            self.say(f"join   round {ev.round}: the joiner reads the observations")
        elif isinstance(ev, ReplanEvent):
            self.say(f"replan round {ev.round}: {ev.reason}")
            self.say(f"model  reads its prompt for round {ev.round + 1}")

    def parallelism(self) -> int:
        """The most tool calls that overlapped in time."""
        marks = sorted([(s, 1) for s, _ in self.spans] + [(e, -1) for _, e in self.spans])
        best = level = 0
        for _, step in marks:
            level += step
            best = max(best, level)
        return best


async def start_model(llm: object, printer: Printer) -> None:
    """Start the embedded model's server now, saying so (it loads the model), rather
    than silently inside the first planner call. Other models need no start."""
    server = getattr(llm, "server", None)
    ensure_started = getattr(llm, "ensure_started", None)
    if ensure_started is None or server is None or server.running:
        return
    printer.say("model  starting its llama.cpp server (loads the model)")
    await asyncio.to_thread(ensure_started)
    printer.say("model  server listening")


def build(dialect: str, llm: object) -> LLMCompilerWorkflow:
    """The workflow for `dialect`: LLMCompiler plans, or Chain-of-Abstraction reasoning."""
    if dialect == "coa":
        return ChainOfAbstractionWorkflow(
            tools=demo_tools.TOOLS,
            llm=llm,
            tool_timeout=10,
            reasoning_examples=demo_tools.COA_REASONING_EXAMPLES,
            answer_examples=demo_tools.COA_ANSWER_EXAMPLES,
            timeout=300,
        )
    return demo_compiler(llm)


async def main(question: str, dialect: str = "llmcompiler") -> int:
    llm = resolve_llm()  # the embedded model's server starts on first use
    print(f"model: {llm.description}")
    kinds = demo_tools.contents().splitlines()[1:]
    print("encyclopedia: " + ", ".join(k.split(" (")[0].lstrip("- ") for k in kinds), end="")
    print(" (list them: .venv/bin/python examples/demo.py --contents)")
    async with llm:  # stops the embedded model's server at the end
        workflow = build(dialect, llm)
        print(f"dialect: {workflow.dialect.name}")
        print(f"question: {question}")
        printer = Printer()
        await start_model(llm, printer)
        printer.say("planning (round 0): the model reads its prompt (instructions, examples)")
        handler = workflow.run(user_msg=question)
        async for ev in handler.stream_events():
            printer.event(ev)
        result = await handler
    print(f"\nanswer: {result}")
    state = await handler.ctx.store.get_state()
    tasks = ", ".join(render_call(t) for t in state.tasks.values()) or "none"
    print(f"tasks: {tasks}")
    summary = f"total {printer.now():.1f}s; up to {printer.parallelism()} tool calls at once"
    if printer.first_start is not None and printer.plan_done is not None:
        summary += (
            f"; first task started at {printer.first_start:.2f}s, "
            f"plan finished at {printer.plan_done:.2f}s"
        )
    print(summary)
    return 0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "question", nargs="*", help="the question (default: $DEMO_QUESTION, else a sample one)"
    )
    parser.add_argument(
        "--contents", action="store_true", help="list what the demo encyclopedia knows, and exit"
    )
    parser.add_argument(
        "--dialect",
        choices=["llmcompiler", "coa"],
        default=os.environ.get("DIALECT") or "llmcompiler",
        help="plan format (default: $DIALECT, else llmcompiler)",
    )
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args(sys.argv[1:])
    if args.contents:
        print(demo_tools.contents())
        sys.exit(0)
    # `make demo Q=...` passes the question in the environment, never through a shell line.
    question = " ".join(args.question) or os.environ.get("DEMO_QUESTION") or QUESTION
    try:
        sys.exit(asyncio.run(main(question, args.dialect)))
    except LLMCompilerError as e:
        print(f"error: {e.message}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
