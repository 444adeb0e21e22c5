"""The typed workflow state: the plan DAG, the task outcomes and the replan counter.

Read it with ``await handler.ctx.store.get_state()``. Every field is JSON-safe (a tool
output that is not becomes its text), so a run's context survives ``to_dict`` and
``from_dict``; only ``memory`` (a live object) is left out of serialization and rebuilt
from ``transcript``.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemory
from pydantic import BaseModel, ConfigDict, Field

from llm_compiler.plan import PlanTask


class TaskOutcome(BaseModel):
    """The observation of a finished task."""

    output: Any = None
    is_error: bool = False
    skipped: bool = False


class RoundState(BaseModel):
    """What a planning round produced, and the joiner's verdict on it."""

    text: str = ""
    thoughts: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    join_id: int | None = None
    n_tasks: int = 0
    complete: bool = False
    joiner_thought: str | None = None
    replan_reason: str | None = None


class CompilerState(BaseModel):
    """State of one run (and, with the same context, of the conversation).

    Attributes:
        question: The current user message.
        transcript: The conversation before the current question.
        tool_names: Tools this run may use (all, or the retriever's choice).
        round: The current planning round (0 for the first plan).
        replans: How many times the joiner asked to replan (capped by ``max_replans``).
        tasks: The plan DAG of every round, by task id (edges are ``PlanTask.deps``).
        outcomes: Observations of finished tasks, by task id.
        blocked: Tasks of this round waiting for their inputs.
        queued: Tasks whose inputs are done, waiting for a concurrency slot.
        running: Tasks dispatched and not yet finished.
        rounds: One record per round.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    question: str = ""
    transcript: list[ChatMessage] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    round: int = 0
    replans: int = 0
    tasks: dict[int, PlanTask] = Field(default_factory=dict)
    outcomes: dict[int, TaskOutcome] = Field(default_factory=dict)
    blocked: list[int] = Field(default_factory=list)
    queued: list[int] = Field(default_factory=list)
    running: list[int] = Field(default_factory=list)
    rounds: list[RoundState] = Field(default_factory=list)
    memory: BaseMemory | None = Field(default=None, exclude=True)

    def round_tasks(self, round: int) -> list[PlanTask]:
        """Tasks of one round, in id order."""
        return sorted((t for t in self.tasks.values() if t.round == round), key=lambda t: t.id)

    def taken_ids(self) -> set[int]:
        """Ids used so far, tasks and join lines."""
        return set(self.tasks) | {r.join_id for r in self.rounds if r.join_id is not None}

    def next_id(self) -> int:
        """The first free task id for a new plan."""
        return max(self.taken_ids(), default=0) + 1
