"""The typed summary of a finished run: rounds, tasks, outcomes, timings, tokens and cost."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from llama_index.core.agent.workflow import AgentOutput
from pydantic import BaseModel, Field, computed_field

from llm_compiler.engine.state import CompilerState
from llm_compiler.events import TaskResult
from llm_compiler.plan import PlanTask, resolve_kwargs
from llm_compiler.tracing.usage import LLMCallUsage, Usage

TaskStatus = Literal["done", "error", "skipped", "not_run"]


class TaskSummary(BaseModel):
    """One task of a run: its plan line and the ``TaskResult`` that settled it, in one view
    (made by :meth:`of`; the state keeps only those two facts).

    Attributes:
        id: The task id (unique across rounds).
        round: The planning round that made it.
        tool: The tool name.
        args: The arguments as planned (``{"$ref": n}`` marks another task's result).
        deps: Ids of the tasks it needed.
        status: ``done``, ``error`` (failed or invalid), ``skipped`` (an input failed) or
            ``not_run`` (the run ended first).
        output: The tool's result, or the error message.
        started_at / finished_at: ``time.time()`` stamps (0 when it never ran).
        cached: Its output was served from the result cache (the tool was not called).
        saved: Seconds the cache saved it (cached only).
    """

    id: int
    round: int
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    deps: list[int] = Field(default_factory=list)
    status: TaskStatus = "not_run"
    output: Any = None
    started_at: float = 0.0
    finished_at: float = 0.0
    cached: bool = False
    saved: float = 0.0

    @property
    def duration(self) -> float:
        """Seconds the tool ran."""
        return max(0.0, self.finished_at - self.started_at)

    @classmethod
    def of(cls, task: PlanTask, result: TaskResult | None) -> TaskSummary:
        """The view of `task`, settled by `result` (None: the run ended first)."""
        view = cls(id=task.id, round=task.round, tool=task.tool, args=task.kwargs, deps=task.deps)
        if result is not None:
            view.status, view.output = result.status, result.output
            view.started_at, view.finished_at = result.started_at, result.finished_at
            view.cached, view.saved = result.cached, result.saved
        return view


class RoundSummary(BaseModel):
    """One planning round: its tasks, plan errors and the joiner's verdict."""

    round: int
    task_ids: list[int] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    replan_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    """Tokens and cost of the round's planner and joiner calls."""
    cached_plan: bool = False
    """The plan was filled from the plan cache (no planner call)."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def no_tasks(self) -> bool:
        """Whether the round planned nothing to run (see `errors` for why)."""
        return not self.task_ids


class RunSummary(BaseModel):
    """What a run did.

    Attributes:
        answer: The final answer.
        dialect: The plan dialect's name.
        rounds: Each planning round.
        replans: How many times the joiner asked to replan.
        tasks: Every task of every round, in id order.
        return_direct: The task of a ``return_direct`` tool that ended the run, if any,
            with its resolved arguments in ``args``.
        prompt_tokens / completion_tokens: Tokens of the planner and joiner calls (the
            server's report, else counted; ``usage``'s, repeated).
        usage: Tokens and cost of the whole run (cost None if a model has no price).
        llm_calls: Each planner and joiner call: tokens, cost, timing.
        llm_seconds / tool_seconds: Wall-clock seconds in LLM calls, and with at least
            one tool running (overlapping tools count once).
        cached_calls: Tool calls served from the result cache instead of made.
        seconds_saved: The seconds those calls took when they ran, together.
        planner_calls_saved: Rounds planned from the plan cache instead of the model.
    """

    answer: str = ""
    dialect: str = ""
    rounds: list[RoundSummary] = Field(default_factory=list)
    replans: int = 0
    tasks: list[TaskSummary] = Field(default_factory=list)
    return_direct: TaskSummary | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage: Usage = Field(default_factory=Usage)
    llm_calls: list[LLMCallUsage] = Field(default_factory=list)
    llm_seconds: float = 0.0
    tool_seconds: float = 0.0
    cached_calls: int = 0
    seconds_saved: float = 0.0
    planner_calls_saved: int = 0

    def task(self, task_id: int) -> TaskSummary | None:
        """The task with this id, if any."""
        return next((t for t in self.tasks if t.id == task_id), None)

    def legacy_raw(self) -> dict[str, Any]:
        """The ``AgentOutput.raw`` dict of earlier releases, kept for compatibility."""
        direct = self.return_direct
        return {
            "rounds": len(self.rounds),
            "replans": self.replans,
            "tasks": {
                t.id: {
                    "tool": t.tool,
                    "kwargs": t.args,
                    "output": t.output,
                    "is_error": t.status in ("error", "skipped"),
                    "skipped": t.status == "skipped",
                }
                for t in self.tasks
            },
            "return_direct": None
            if direct is None
            else {"task_id": direct.id, "tool": direct.tool, "kwargs": direct.args},
            "summary": self.model_dump(mode="json"),
        }


class CompilerOutput(AgentOutput):
    """The result of a run: an ``AgentOutput`` (``str()`` is the answer) with its summary."""

    summary: RunSummary = Field(default_factory=RunSummary)


def summarize(
    state: CompilerState, answer: str, dialect: str, direct: int | None = None
) -> RunSummary:
    """The typed summary of the run in `state`."""
    tasks = [
        TaskSummary.of(task, state.outcomes.get(task.id))
        for task in sorted(state.tasks.values(), key=lambda t: t.id)
    ]
    usage = state.usage()
    direct_summary = None
    if direct is not None:
        task = state.tasks[direct]
        results = {d: state.outcomes[d].output for d in task.deps}
        base = next(t for t in tasks if t.id == direct)
        direct_summary = base.model_copy(update={"args": resolve_kwargs(task.kwargs, results)})
    return RunSummary(
        answer=answer,
        dialect=dialect,
        rounds=[round_summary(state, i) for i in range(len(state.rounds))],
        replans=state.replans,
        tasks=tasks,
        return_direct=direct_summary,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        usage=usage,
        llm_calls=state.llm_calls,
        llm_seconds=covered((c.started_at, c.finished_at) for c in state.llm_calls),
        tool_seconds=covered((t.started_at, t.finished_at) for t in tasks),
        cached_calls=sum(t.cached for t in tasks),
        seconds_saved=sum(t.saved for t in tasks),
        planner_calls_saved=sum(r.cached_plan for r in state.rounds),
    )


def round_summary(state: CompilerState, round: int) -> RoundSummary:
    """The summary of one round of the run in `state`."""
    record = state.rounds[round]
    return RoundSummary(
        round=round,
        task_ids=[t.id for t in state.round_tasks(round)],
        errors=record.errors,
        replan_reason=record.replan_reason,
        usage=state.usage(round),
        cached_plan=record.cached_plan,
    )


def covered(intervals: Iterable[tuple[float, float]]) -> float:
    """Seconds covered by at least one of `intervals` (overlaps count once)."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(i for i in intervals if i[1] > i[0]):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total
