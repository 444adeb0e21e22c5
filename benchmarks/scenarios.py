"""Scenarios: a DAG of tool calls plus the scripts each system's LLM replays for it.

A scenario is a list of tasks (``lookup("x")``, ``step($1)``, ``combine([$1, $2])``) with
tool latencies and an LLM latency model. From it we derive, deterministically:

* the LLMCompiler planner/joiner replies (one plan per round; a ``Replan`` verdict
  between rounds), the ReAct replies (one tool per LLM call, in task order) and the
  FunctionAgent replies (all calls of one dependency level per LLM call);
* the tool calls every system must make (arguments included, so data flow is checked)
  and the final answer;
* each system's critical-path lower bound under the latency model.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks.model import CLOUD, INSTANT, LOCAL_SLOW, FCReply, LatencyModel
from benchmarks.tools import KINDS, PARAMS, ToolSpec
from llm_compiler.testing import LLMCall, split_tokens


@dataclass(frozen=True)
class Ref:
    """The result of task `id`."""

    id: int


@dataclass(frozen=True)
class Task:
    """One tool call: a query string (lookup), a Ref (step) or a tuple of Refs (combine)."""

    id: int
    tool: str
    arg: Any
    round: int = 0

    @property
    def deps(self) -> tuple[int, ...]:
        """Ids of the tasks this one needs."""
        if isinstance(self.arg, Ref):
            return (self.arg.id,)
        if isinstance(self.arg, tuple):
            return tuple(r.id for r in self.arg)
        return ()

    def plan_call(self) -> str:
        """The call in LLMCompiler plan syntax."""
        if isinstance(self.arg, Ref):
            return f"{self.tool}(${self.arg.id})"
        if isinstance(self.arg, tuple):
            return f"{self.tool}([{', '.join(f'${r.id}' for r in self.arg)}])"
        return f"{self.tool}({json.dumps(self.arg)})"


@dataclass(frozen=True)
class Bound:
    """A critical-path lower bound (seconds from the run's start)."""

    total: float
    first_task: float | None = None
    """Earliest moment a tool can start."""
    plan_done: float | None = None
    """When the first plan has fully streamed (LLMCompiler only)."""


_TAG = re.compile(r"\[run ([^\]]+)\]")

THOUGHT_DONE = "I have all the results I need."


@dataclass
class Scenario:
    """A benchmark case. See the module docstring."""

    name: str
    title: str
    tools: tuple[ToolSpec, ...]
    tasks: tuple[Task, ...]
    model: LatencyModel = CLOUD
    runs: int = 4
    """Measured LLMCompiler runs (after one warm-up run)."""
    react_runs: int = 1
    """ReActAgent runs (0: none); ReAct is slow and its time is mostly modelled sleep."""
    fc_runs: int = 2
    """FunctionAgent runs (0: none)."""
    concurrency: int = 1
    """Runs started at once on one workflow instance (> 1: a throughput scenario)."""
    max_tasks: int = 100
    replan_reason: str = "Combine the results found so far."
    notes: list[str] = field(default_factory=list)

    # ------------------------------------------------------------------ the DAG

    @property
    def rounds(self) -> int:
        """Planning rounds (LLMCompiler)."""
        return max(t.round for t in self.tasks) + 1

    def tool(self, name: str) -> ToolSpec:
        """The spec of tool `name`."""
        return next(s for s in self.tools if s.name == name)

    def latency(self, task: Task) -> float:
        """Seconds `task` takes."""
        return self.tool(task.tool).latency

    def resolved(self, task: Task, values: dict[int, int]) -> Any:
        """The argument `task` is called with, references replaced by values."""
        if isinstance(task.arg, Ref):
            return values[task.arg.id]
        if isinstance(task.arg, tuple):
            return [values[r.id] for r in task.arg]
        return task.arg

    def values(self) -> dict[int, int]:
        """Every task's result."""
        out: dict[int, int] = {}
        for task in sorted(self.tasks, key=lambda t: t.id):
            out[task.id] = KINDS[self.tool(task.tool).kind](self.resolved(task, out))
        return out

    def expected_calls(self) -> Counter[tuple[str, Any]]:
        """``(tool, argument)`` of every call a correct run makes (lists as tuples)."""
        values = self.values()
        calls: Counter[tuple[str, Any]] = Counter()
        for task in self.tasks:
            arg = self.resolved(task, values)
            calls[(task.tool, tuple(arg) if isinstance(arg, list) else arg)] += 1
        return calls

    def answer(self) -> str:
        """The final answer: the values of the tasks no other task needs."""
        needed = {d for t in self.tasks for d in t.deps}
        values = self.values()
        sinks = [
            str(values[t.id]) for t in sorted(self.tasks, key=lambda t: t.id) if t.id not in needed
        ]
        if len(sinks) > 12:
            return f"The {len(sinks)} results add up to {sum(int(s) for s in sinks)}."
        return f"The results are {', '.join(sinks)}."

    def question(self, tag: object) -> str:
        """The user message of one run (`tag` keys the scripted replies)."""
        return f"{self.title} [run {tag}]"

    # ------------------------------------------------------------------ LLMCompiler

    def round_tasks(self, round: int) -> list[Task]:
        """Tasks of one round, in id order."""
        return sorted((t for t in self.tasks if t.round == round), key=lambda t: t.id)

    def plan_text(self, round: int) -> str:
        """The planner's reply for `round`."""
        tasks = self.round_tasks(round)
        lines = [f"{t.id}. {t.plan_call()}" for t in tasks]
        lines.append(f"{tasks[-1].id + 1}. join()<END_OF_PLAN>")
        return "\n".join(lines)

    def joiner_text(self, round: int) -> str:
        """The joiner's reply after `round`."""
        if round < self.rounds - 1:
            return f"Thought: These results are not enough.\nAction: Replan({self.replan_reason})"
        return f"Thought: {THOUGHT_DONE}\nAction: Finish({self.answer()})"

    def compiler_script(self) -> Callable[[LLMCall], str]:
        """LatencyLLM script: per run tag, plan, join, plan, join, ... in call order."""
        replies: list[str] = []
        for r in range(self.rounds):
            replies += [self.plan_text(r), self.joiner_text(r)]
        seen: Counter[str] = Counter()

        def script(call: LLMCall) -> str:
            m = _TAG.search(call.prompt)
            if m is None:
                raise AssertionError("no run tag in the prompt")
            i = seen[m.group(1)]
            seen[m.group(1)] += 1
            return replies[i]

        return script

    def compiler_bound(self, at_call_end: bool = False) -> Bound:
        """Lower bound for LLMCompiler with streamed dispatch.

        A task starts no earlier than the token holding the newline that ends its line
        (``ttft + index / tok/s`` after the planner call; with `at_call_end`, the token
        closing the call, which is when the parser dispatches since it learned to parse a
        call at its ``)``) and than its inputs' finish; the joiner no earlier than the last
        plan token and every task of the round; then the joiner's reply time; a replan
        round starts when that joiner reply ends.
        """
        m = self.model
        t, finish = 0.0, {}
        first: float | None = None
        plan_done: float | None = None
        for r in range(self.rounds):
            text = self.plan_text(r)
            tokens = split_tokens(text)
            ends, pos = [], 0
            for tok in tokens:
                pos += len(tok)
                ends.append(pos)
            newlines = [i for i, c in enumerate(text) if c == "\n"]
            tasks = self.round_tasks(r)
            for task, nl in zip(tasks, newlines, strict=False):
                ready = t + m.token_at(bisect.bisect_right(ends, nl - at_call_end))
                start = max([ready] + [finish[d] for d in task.deps])
                finish[task.id] = start + self.latency(task)
                first = start if first is None else min(first, start)
            done = t + m.token_at(len(tokens) - 1)
            plan_done = done if plan_done is None else plan_done
            join_start = max([done] + [finish[task.id] for task in tasks])
            t = join_start + m.duration(self.joiner_text(r))
        return Bound(t, first, plan_done)

    # ------------------------------------------------------------------ ReAct

    def react_script(self) -> list[str]:
        """ReAct replies: one tool call per LLM call in task order, then the answer."""
        values = self.values()
        out = []
        for task in sorted(self.tasks, key=lambda t: t.id):
            param = PARAMS[self.tool(task.tool).kind]
            args = json.dumps({param: self.resolved(task, values)})
            out.append(
                f"Thought: I need to use {task.tool}.\nAction: {task.tool}\nAction Input: {args}"
            )
        out.append(f"Thought: {THOUGHT_DONE}\nAnswer: {self.answer()}")
        return out

    def react_bound(self) -> Bound:
        """Lower bound for ReAct: every LLM reply and every tool call in sequence."""
        m, t = self.model, 0.0
        tasks = sorted(self.tasks, key=lambda t: t.id)
        first = None
        for task, text in zip(tasks, self.react_script(), strict=False):
            t += m.duration(text)
            first = t if first is None else first
            t += self.latency(task)
        return Bound(t + m.duration(self.react_script()[-1]), first)

    # ------------------------------------------------------------------ FunctionAgent

    def levels(self) -> list[list[Task]]:
        """Tasks grouped by dependency depth (what one parallel tool-call round can do)."""
        depth: dict[int, int] = {}
        for task in sorted(self.tasks, key=lambda t: t.id):
            depth[task.id] = 1 + max((depth[d] for d in task.deps), default=-1)
        out: list[list[Task]] = [[] for _ in range(max(depth.values()) + 1)]
        for task in sorted(self.tasks, key=lambda t: t.id):
            out[depth[task.id]].append(task)
        return out

    def fc_script(self) -> list[FCReply]:
        """FunctionAgent replies: all calls of a level at once, then the answer."""
        values = self.values()
        out = []
        for level in self.levels():
            calls = tuple(
                (t.tool, {PARAMS[self.tool(t.tool).kind]: self.resolved(t, values)}) for t in level
            )
            out.append(FCReply(calls=calls))
        out.append(FCReply(text=self.answer()))
        return out

    def fc_bound(self) -> Bound:
        """Lower bound for FunctionAgent: per level, the reply then its slowest call."""
        m, t = self.model, 0.0
        first = None
        script = self.fc_script()
        for level, reply in zip(self.levels(), script, strict=False):
            t += m.token_at(len(reply.tokens()) - 1)
            first = t if first is None else first
            t += max(self.latency(task) for task in level)
        return Bound(t + m.token_at(len(script[-1].tokens()) - 1), first)


# ---------------------------------------------------------------------- the catalogue

CITIES = [
    "Paris", "Berlin", "Madrid", "Rome", "Vienna", "Lisbon", "Dublin", "Oslo",
    "Prague", "Warsaw", "Athens", "Helsinki",
]  # fmt: skip


def _lookups(n: int, tool: str = "lookup", start: int = 1, what: str = "population") -> list[Task]:
    return [Task(start + i, tool, f"{what} of {CITIES[i % len(CITIES)]}") for i in range(n)]


def scenarios(quick: bool = False) -> list[Scenario]:
    """Every scenario; `quick` cuts runs (for a smoke test)."""
    lookup = ToolSpec("lookup", "lookup", 0.5)
    fanout = _lookups(8)
    out = [
        Scenario(
            "fanout-8",
            "What are the populations of 8 cities?",
            (lookup,),
            tuple(fanout),
            notes=["8 independent 0.5 s lookups."],
        ),
        Scenario(
            "chain-4",
            "Apply three steps to the seed value.",
            (ToolSpec("lookup", "lookup", 0.2), ToolSpec("step", "step", 0.2)),
            (
                Task(1, "lookup", "seed value"),
                Task(2, "step", Ref(1)),
                Task(3, "step", Ref(2)),
                Task(4, "step", Ref(3)),
            ),
            notes=["4 dependent 0.2 s calls: no parallelism to find."],
        ),
        Scenario(
            "diamond",
            "Transform the seed two ways and combine.",
            (
                ToolSpec("lookup", "lookup", 0.3),
                ToolSpec("step", "step", 0.3),
                ToolSpec("combine", "combine", 0.2),
            ),
            (
                Task(1, "lookup", "seed value"),
                Task(2, "step", Ref(1)),
                Task(3, "step", Ref(1)),
                Task(4, "combine", (Ref(2), Ref(3))),
            ),
            notes=["lookup 0.3 -> two step 0.3 in parallel -> combine 0.2."],
        ),
        Scenario(
            "wave",
            "Look up x quickly and y slowly, then transform x.",
            (
                ToolSpec("fast", "lookup", 0.2),
                ToolSpec("slow", "lookup", 1.0),
                ToolSpec("step", "step", 0.2),
            ),
            (Task(1, "fast", "x"), Task(2, "slow", "y"), Task(3, "step", Ref(1))),
            notes=["fast 0.2 | slow 1.0, step($1) 0.2: no wave barrier means ~1.0 s of tools."],
        ),
        Scenario(
            "parallelqa",
            "What is the total population of 6 cities?",
            (lookup, ToolSpec("combine", "combine", 0.1)),
            (*_lookups(6), Task(7, "combine", tuple(Ref(i) for i in range(1, 7)))),
            notes=["6 lookups 0.5 s, then one math step (0.1 s) over all of them."],
        ),
        Scenario(
            "slow-local-8",
            "What are the areas of 8 cities?",
            (ToolSpec("lookup", "lookup", 0.5),),
            tuple(_lookups(8, what="area")),
            model=LOCAL_SLOW,
            runs=3,
            notes=[
                "8 lookups 0.5 s on a 10 tok/s local model: tasks start while the plan streams."
            ],
        ),
        Scenario(
            "sync-fanout-8",
            "What are the populations of 8 cities (sync tool)?",
            (ToolSpec("lookup", "lookup", 0.5, sync=True),),
            tuple(fanout),
            react_runs=0,
            notes=["8 blocking (time.sleep) 0.5 s lookups run in threads (ReAct: as fanout-8)."],
        ),
        Scenario(
            "replan",
            "What is the total population of 3 cities?",
            (ToolSpec("lookup", "lookup", 0.3), ToolSpec("combine", "combine", 0.2)),
            (*_lookups(3), Task(5, "combine", (Ref(1), Ref(2), Ref(3)), round=1)),
            notes=["Round 1: 3 lookups 0.3 s; joiner replans; round 2: combine 0.2 s."],
        ),
        Scenario(
            "concurrent-50",
            "What are the populations of 4 cities?",
            (ToolSpec("lookup", "lookup", 0.3),),
            tuple(_lookups(4)),
            runs=2,
            react_runs=0,
            fc_runs=0,
            concurrency=50,
            notes=["50 runs at once on one workflow instance, 4 lookups 0.3 s each."],
        ),
        Scenario(
            "tasks-500",
            "Look up 400 items and combine them in groups of 4.",
            (ToolSpec("lookup", "lookup", 0.0), ToolSpec("combine", "combine", 0.0)),
            tuple(_plan500()),
            model=INSTANT,
            runs=3,
            react_runs=0,
            fc_runs=0,
            max_tasks=1000,
            notes=[
                "500 tasks (100 x [4 lookups + combine]), instant LLM and tools: "
                "the per-task overhead of the runtime."
            ],
        ),
    ]
    if quick:
        for s in out:
            s.runs = 1
            s.fc_runs = min(s.fc_runs, 1)
    return out


def _plan500() -> list[Task]:
    tasks: list[Task] = []
    for block in range(100):
        base = block * 5 + 1
        tasks += [Task(base + i, "lookup", f"item {block}-{i}") for i in range(4)]
        tasks.append(Task(base + 4, "combine", tuple(Ref(base + i) for i in range(4))))
    return tasks


def scenario(name: str) -> Scenario:
    """The scenario called `name`."""
    return next(s for s in scenarios() if s.name == name)


def per_task_overhead(latency: float, bound: float, n_tasks: int) -> float:
    """Seconds of runtime overhead per task."""
    return max(0.0, latency - bound) / n_tasks if n_tasks else math.nan
