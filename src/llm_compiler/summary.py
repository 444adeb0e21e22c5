"""The typed summary of a finished run: rounds, tasks, outcomes, timings, token usage."""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.agent.workflow import AgentOutput
from pydantic import BaseModel, Field

TaskStatus = Literal["done", "error", "skipped", "not_run"]


class TaskSummary(BaseModel):
    """One task of a run.

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

    @property
    def duration(self) -> float:
        """Seconds the tool ran."""
        return max(0.0, self.finished_at - self.started_at)


class RoundSummary(BaseModel):
    """One planning round: its tasks, plan errors and the joiner's verdict."""

    round: int
    task_ids: list[int] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    replan_reason: str | None = None


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
        prompt_tokens / completion_tokens: Token usage of the planner and joiner calls,
            where the LLM reports it (0 otherwise).
    """

    answer: str = ""
    dialect: str = ""
    rounds: list[RoundSummary] = Field(default_factory=list)
    replans: int = 0
    tasks: list[TaskSummary] = Field(default_factory=list)
    return_direct: TaskSummary | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

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
