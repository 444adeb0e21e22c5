"""The typed workflow state: the plan DAG, the task outcomes and the replan counter.

Read it with ``await handler.ctx.store.get_state()``. Every field is JSON-safe (a tool
output that is not becomes its text), so a run's context survives ``to_dict`` and
``from_dict``; only ``memory`` (a live object) is left out of serialization and rebuilt
on resume from ``transcript``. The run's live tools are not state: the workflow keeps them
per run, and a process that resumes the run looks them up once by ``tool_names``.

The state holds facts only: tasks (admitted once, by id), their outcomes (settled once),
the scheduler's journal of the events it took (``log``), each round's plan and verdict,
and the answer. Every write sets facts (never ``+=``), so a step that runs again after a
crash, with its own writes already committed, writes the same values. The scheduler's
bookkeeping (blocked, queued, running) is derived from ``log``
(:mod:`llm_compiler.engine.scheduler`).
"""

from __future__ import annotations

from typing import Any, Literal

from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemory
from pydantic import BaseModel, ConfigDict, Field

from llm_compiler.dialects.prompting import RoundRecord, TaskRecord
from llm_compiler.events import PlanApprovalResponse, PlanEvent, RunMode, TaskResult
from llm_compiler.plan import PlanTask
from llm_compiler.tracing.usage import LLMCallUsage, Usage


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
    cached_plan: bool = False
    """The round's plan came from the plan cache (no planner call)."""


class TaskVerdict(BaseModel):
    """A human's verdict on a held task (from its ``TaskApprovalResponse``)."""

    task_id: int
    action: Literal["approve", "edit", "reject"] = "approve"
    args: dict[str, Any] | None = None
    reason: str = ""


class SchedStep(BaseModel):
    """One event the scheduler took, as the facts it added: its entry in the journal."""

    event_id: str
    at: float = 0.0
    """When the scheduler took it (``time.time()``): how long ready tasks waited."""
    verdict: TaskVerdict | None = None
    """The verdict on a held task this event recorded."""
    admit: list[int] = Field(default_factory=list)
    """Tasks admitted, in order."""
    settle: int | None = None
    """The task this event settled."""
    complete: bool = False
    """Whether this event completed its round's plan."""


class CompilerState(BaseModel):
    """State of one run (and, with the same context, of the conversation).

    Attributes:
        run_id: Identifies the current run; events of an earlier run on the same context
            (a cancelled turn's late results) are ignored.
        mode: How the run treats plans (see ``CompilerStartEvent``).
        held: In ``approve`` mode, the last round's complete plan, as made.
        verdict: The verdict ``held`` got (None while it waits for one).
        question: The current user message.
        transcript: The conversation before the current question.
        tool_names: Tools this run may use (all, or the retriever's choice).
        round: The current planning round (0 for the first plan).
        replans: How many times the joiner asked to replan (capped by ``max_replans``).
        tasks: The plan DAG of every round, by task id (edges are ``PlanTask.deps``).
        outcomes: The first ``TaskResult`` of each settled task, by task id (its
            observation: output, error, timing).
        log: The scheduler's journal: the events it took, in order (see ``SchedStep``).
        rounds: One record per round.
        answer: The run's answer, once given (a step run again after a crash returns it).
        direct: The id of the ``return_direct`` task that gave the answer, if one did.
        llm_calls: Tokens, cost and timing of each planner and joiner call of this question:
            one record per call, the only one (totals are sums over it, see ``usage``).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str = ""
    mode: RunMode = "run"
    held: PlanEvent | None = None
    verdict: PlanApprovalResponse | None = None
    question: str = ""
    transcript: list[ChatMessage] = Field(default_factory=list)
    tool_names: list[str] = Field(default_factory=list)
    round: int = 0
    replans: int = 0
    tasks: dict[int, PlanTask] = Field(default_factory=dict)
    outcomes: dict[int, TaskResult] = Field(default_factory=dict)
    log: list[SchedStep] = Field(default_factory=list)
    rounds: list[RoundState] = Field(default_factory=list)
    answer: str | None = None
    direct: int | None = None
    llm_calls: list[LLMCallUsage] = Field(default_factory=list)
    memory: BaseMemory | None = Field(default=None, exclude=True)

    def round_tasks(self, round: int) -> list[PlanTask]:
        """Tasks of one round, in id order."""
        return sorted((t for t in self.tasks.values() if t.round == round), key=lambda t: t.id)

    def taken_ids(self, before: int | None = None) -> set[int]:
        """Ids used so far (by rounds before `before`, if given), tasks and join lines."""
        cut = len(self.rounds) if before is None else before
        joins = {r.join_id for r in self.rounds[:cut] if r.join_id is not None}
        if before is None:
            return set(self.tasks) | joins
        return {i for i, t in self.tasks.items() if t.round < before} | joins

    def next_id(self, round: int | None = None) -> int:
        """The first free task id for a new plan (of `round`: ids its earlier rounds left).

        A round planned again after a crash numbers its tasks as the first time, so the
        tasks it already admitted keep their ids (and their results)."""
        return max(self.taken_ids(round), default=0) + 1

    def usage(self, round: int | None = None) -> Usage:
        """Tokens and cost of every planner and joiner call of the question (of `round`)."""
        return Usage.total(c for c in self.llm_calls if round is None or c.round == round)


def round_records(state: CompilerState, max_chars: int) -> list[RoundRecord]:
    """Every round of the current question, with observations cut to `max_chars`."""
    out = []
    for round, record in enumerate(state.rounds):
        tasks = []
        for task in state.round_tasks(round):
            outcome = state.outcomes.get(task.id)
            tasks.append(
                TaskRecord(
                    id=task.id,
                    tool=task.tool,
                    text=task.text,
                    observation=None if outcome is None else observe(outcome.output, max_chars),
                    is_error=outcome is not None and outcome.is_error,
                    skipped=outcome is not None and outcome.skipped,
                )
            )
        out.append(
            RoundRecord(
                tasks=tasks,
                errors=record.errors,
                thought=record.joiner_thought,
                reason=record.replan_reason,
                text=record.text,
            )
        )
    return out


def observe(output: Any, max_chars: int) -> str:
    """A result as the prompts show it, cut to `max_chars`."""
    text = output if isinstance(output, str) else repr(output)
    if len(text) > max_chars:
        text = text[:max_chars] + " ...(cut)"
    return text
