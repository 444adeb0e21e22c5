"""``verbose=True`` of the legacy workers: the plan, each task and the decision, on stdout."""

from __future__ import annotations

import sys
from typing import Any

from llm_compiler.dialects.base import PlanDialect
from llm_compiler.dialects.coa.prompts import render_functions
from llm_compiler.events import CompilerStream, PlanEvent, ReplanEvent, TaskReady, TaskResult
from llm_compiler.plan import render_value


def _say(text: str) -> None:
    print(text, file=sys.stdout, flush=True)  # noqa: T201 - verbose=True asks for stdout


class VerbosePrinter:
    """Prints a run's events the way the legacy agents did.

    Args:
        dialect: The run's dialect (its joiner text is parsed to show the decision).
        coa: Print in the Chain-of-Abstraction pack's words.
    """

    def __init__(self, dialect: PlanDialect, coa: bool) -> None:
        self.dialect, self.coa = dialect, coa
        self.join_text: dict[int, str] = {}
        self.wants_functions = coa

    def functions(self, tools: list[Any]) -> None:
        """The CoA pack showed the functions as the model sees them, once per run."""
        self.wants_functions = False
        _say("==== Available Parsed Functions ====")
        _say(render_functions(tools))

    def event(self, ev: Any) -> None:
        """Print one engine event (token events are collected for the decision)."""
        if isinstance(ev, CompilerStream):
            if ev.phase == "join":
                self.join_text[ev.round] = self.join_text.get(ev.round, "") + ev.delta
        elif isinstance(ev, PlanEvent) and ev.complete:
            self._plan(ev)
        elif isinstance(ev, TaskReady):
            args = ", ".join(f"{k}={render_value(v)}" for k, v in ev.args.items())
            if self.coa:
                _say(f"==== Executing {ev.tool_name} with inputs {args} ====")
            else:
                _say(f"> Running task {ev.task_id}: {ev.tool_name}({args})")
        elif isinstance(ev, TaskResult):
            status = "Skipped" if ev.skipped else "Failed" if ev.is_error else "Ran"
            _say(f"{status} task {ev.task_id}: {ev.tool_name}. Observation: {ev.output}")
        elif isinstance(ev, ReplanEvent):
            if ev.thought:
                _say(f"> Thought: {ev.thought}")
            _say(f"> Replan: {ev.reason}")

    def _plan(self, ev: PlanEvent) -> None:
        if self.coa:
            _say("==== Generated Chain of Abstraction ====")
            _say(ev.text.strip())
        else:
            _say(f"> Plan (round {ev.round}): {ev.text.strip()}")
        for error in ev.errors:
            _say(f"> Plan error: {error}")

    def answer(self, answer: str, round: int) -> None:
        """The joiner's thought (where it wrote one) and the answer."""
        text = self.join_text.get(round)
        if text and not self.coa:
            thought = self.dialect.parse_decision(text).thought
            if thought:
                _say(f"> Thought: {thought}")
        _say(f"> Answer: {answer}")
