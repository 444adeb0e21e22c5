"""Events of the LLMCompiler workflow.

Naming: an ``*Event`` marks a phase of a round (plan, join, replan); a bare noun is a
per-task message. Every event carries ``round`` (0 for the first plan) and is written to
the stream, so a UI can draw the DAG live from ``handler.stream_events()``.

Planner and joiner tokens are streamed as :class:`CompilerStream` events (a llama-index
``AgentStream``) with ``phase`` (``plan`` or ``join``) and ``round``: one per chunk the
model sends, or one per burst of chunks that arrive together (likewise, a burst of
completed plan lines comes as one ``PlanEvent``).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from llama_index.core.agent.workflow import AgentStream
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import BaseMemory
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, model_validator
from workflows.events import Event, HumanResponseEvent, InputRequiredEvent, StartEvent

from llm_compiler.plan import PlanErrorKind, PlanTask, kinds_given
from llm_compiler.tracing.usage import LLMCallUsage

RunMode = Literal["run", "plan_only", "approve"]


class CompilerStartEvent(StartEvent):
    """Starts a run: ``workflow.run(user_msg=..., chat_history=..., memory=..., mode=...)``.

    ``mode``: ``run`` (default: tasks start while the plan streams), ``plan_only`` (the
    run returns the compiled plan as a :class:`CompiledPlan` without running anything),
    or ``approve`` (each round's plan waits for a :class:`PlanApprovalResponse`).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    user_msg: str | ChatMessage | None = None
    chat_history: list[ChatMessage] | None = None
    memory: BaseMemory | None = Field(default=None, exclude=True)
    mode: RunMode = "run"
    compiler_run_id: str | None = None
    """Set by ``LLMCompilerWorkflow.run()``: the run's id, known before the run starts."""


class _RunEvent(Event):
    """An event of one run; ``run_id`` keeps a cancelled run's late events out of the next."""

    run_id: str = ""
    _data: dict[str, Any] = PrivateAttr(default={})
    """The event's extra fields, as on every workflows ``Event``; a plain default (each
    instance gets its own empty dict) rather than ``default_factory=dict``, whose
    signature pydantic < 2.14 inspects on every construction."""


def _event_id() -> str:
    return uuid.uuid4().hex


class _FactEvent(_RunEvent):
    """An event that adds facts to the run (tasks, outcomes).

    ``event_id`` names this one delivery: the scheduler journals the ids it took, so a
    step run again after a crash recognizes its own event, and a second delivery of the
    same fact (another ``TaskResult`` for a settled task) changes nothing.
    """

    event_id: str = Field(default_factory=_event_id)


class PlanEvent(_FactEvent):
    """Emitted by the planner; consumed by the scheduler.

    While the plan streams, one ``PlanEvent`` (``complete=False``) carries the tasks whose
    lines just completed. The last one of a round has ``complete=True`` and carries the
    whole plan: every task, the planner's thoughts, its raw text, the id of its ``join()``
    line, plan-level errors (no join, empty plan, too many tasks, reused ids) and the
    planner call's tokens and cost (``llm_call``; ``prompt_tokens`` and
    ``completion_tokens`` repeat its counts).
    """

    round: int
    tasks: list[PlanTask] = Field(default_factory=list)
    complete: bool = False
    thoughts: list[str] = Field(default_factory=list)
    text: str = ""
    errors: list[str] = Field(default_factory=list)
    join_id: int | None = None
    llm_call: LLMCallUsage | None = None
    replaces: bool = False
    """A complete plan that replaces the one streamed for its round before (a plan a
    human edited before approving it): forget that one's tasks, even where ids repeat."""

    error_kinds: list[PlanErrorKind] = Field(default_factory=list)
    """The kind of each plan-level error (``no_join``, ``too_many_tasks``, ...), as made."""

    cached: bool = False
    """The plan was filled from the plan cache (a template of a question of the same
    shape); no planner call made it."""

    def __init__(self, **params: Any) -> None:
        # Read back over HTTP, the counts derived from llm_call are not data of their own.
        for derived in ("prompt_tokens", "completion_tokens"):
            params.pop(derived, None)
        super().__init__(**params)

    @model_validator(mode="before")
    @classmethod
    def _error_kinds(cls, data: Any) -> Any:
        return kinds_given(data, "errors", "error_kinds")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prompt_tokens(self) -> int:
        """The planner call's prompt tokens (``llm_call``'s; 0 without one)."""
        return 0 if self.llm_call is None else self.llm_call.prompt_tokens

    @computed_field  # type: ignore[prop-decorator]
    @property
    def completion_tokens(self) -> int:
        """The planner call's completion tokens (``llm_call``'s; 0 without one)."""
        return 0 if self.llm_call is None else self.llm_call.completion_tokens


class TaskReady(_RunEvent):
    """Emitted by the scheduler when a task's inputs are done; consumed by the executor.

    ``args`` are the resolved keyword arguments the tool is called with (the executor
    resolves them again from the run's facts: an event is never trusted to name them).
    """

    round: int
    task_id: int
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Any] = Field(default_factory=dict)
    """The tool's policy as JSON (side effect, limits, keys, retry; see ``ToolPolicy``)."""
    resource_keys: list[str] = Field(default_factory=list)
    """The resource keys this call holds while it runs."""
    waited: float = 0.0
    """Seconds the task waited for a slot (a limit or a resource key) once ready."""

    @property
    def call_key(self) -> str:
        """``run_id:round:task_id``: the same for every attempt of this call (the tool
        reads it with :func:`llm_compiler.idempotency_key`)."""
        return call_key(self.run_id, self.round, self.task_id)


def call_key(run_id: str, round: int, task_id: int) -> str:
    """The stable key of one tool call of a run: ``run_id:round:task_id``."""
    return f"{run_id}:{round}:{task_id}"


class TaskResult(_FactEvent):
    """One per task: emitted by the executor, or by the scheduler for a task that cannot run.

    Attributes:
        output: The observation (the tool's raw result, or the error message).
        is_error: The tool raised, timed out, got bad arguments, or the line was invalid.
        skipped: The task did not run because a task it depends on failed.
        started_at / finished_at: ``time.time()`` stamps; ``duration`` in seconds.
        attempts: Tries the call took (more than 1 when its policy retried it).
        waited: Seconds the task waited for a slot once ready.
        cached: The output was served from the result cache (an earlier call's with the
            same tool, version and arguments); the tool was not called (``attempts`` 0).
        saved: Seconds the call took when it ran, less what serving it took (cached only).
    """

    round: int
    task_id: int
    tool_name: str
    output: Any = None
    is_error: bool = False
    skipped: bool = False
    started_at: float = 0.0
    finished_at: float = 0.0
    attempts: int = 1
    waited: float = 0.0
    cached: bool = False
    saved: float = 0.0

    @property
    def duration(self) -> float:
        """Seconds the tool ran (0 for a task that never started)."""
        return max(0.0, self.finished_at - self.started_at)

    @property
    def status(self) -> Literal["done", "error", "skipped"]:
        """``done``, ``error`` (failed or invalid) or ``skipped`` (an input failed)."""
        return "skipped" if self.skipped else "error" if self.is_error else "done"


class TaskStarted(_RunEvent):
    """A try of a call starts: written to the stream for each retry (the first try is the
    ``TaskReady``), and given to ``LLMCompilerWorkflow.before_tool_call`` for every try.

    ``attempt`` of ``attempts``; ``side_effect`` is the tool's class (``pure``,
    ``idempotent``, ``at_most_once``): what a runtime must do if the run stops before
    the result is recorded (see :func:`llm_compiler.engine.policy.resume_in_flight`).
    """

    round: int
    task_id: int
    tool_name: str
    attempt: int = 1
    attempts: int = 1
    side_effect: str = "at_most_once"
    idempotency_key: str = ""
    error: str | None = None
    """The previous try's error, on a retry."""
    started_at: float = 0.0
    """When this try started (``time.time()``): where the page's timeline marks it."""


class TaskCut(TaskReady):
    """Sent by a runtime resuming a run: the call of this task had its start committed
    (``at_most_once``) and a crash cut it. The executor does not call it again: it records
    the workflow's ``after_crash`` observation ("outcome unknown") and streams it. A kind
    of ``TaskReady`` (the executor's event); not one a client may send (only
    human-response events are)."""


class TaskWaiting(_RunEvent):
    """Written to the stream when a ready task must wait for a slot: ``slot`` names the
    one that binds (``*``: the run's cap, ``tool:x``, ``limit:name``, ``key:account:7``)."""

    round: int
    task_id: int
    tool_name: str
    slot: str


class TaskApprovalRequest(InputRequiredEvent):
    """A ready task whose tool requires approval, held until a human's verdict (the rest
    of the plan runs on). Answer with :meth:`respond`, or a workflow server's
    ``POST /events/{handler_id}`` with a :class:`TaskApprovalResponse`."""

    round: int
    run_id: str = ""
    task_id: int
    tool_name: str
    args: dict[str, Any] = Field(default_factory=dict)
    policy: dict[str, Any] = Field(default_factory=dict)

    @property
    def approval_id(self) -> str:
        """The held task's own id: ``run_id:round:task_id``."""
        return call_key(self.run_id, self.round, self.task_id)

    def respond(
        self,
        action: Literal["approve", "edit", "reject"] = "approve",
        args: dict[str, Any] | None = None,
        reason: str = "",
    ) -> TaskApprovalResponse:
        """The verdict on this task, naming the run, round and task it answers."""
        return TaskApprovalResponse(
            run_id=self.run_id,
            round=self.round,
            task_id=self.task_id,
            action=action,
            args=args,
            reason=reason,
        )


class AwaitingApproval(_RunEvent):
    """Written to the stream when the round can go no further without verdicts: its plan
    is complete and nothing runs or waits for a slot, but ``task_ids`` are held. (A chat
    front-end ends its turn here with an interrupt; see :mod:`llm_compiler.serving.agui`.)"""

    round: int
    task_ids: list[int] = Field(default_factory=list)


class TaskApprovalResponse(HumanResponseEvent):
    """A human's verdict on one held task.

    Attributes:
        run_id / round / task_id: The task it answers; a verdict naming any other (not
            held, answered before, another run) changes nothing.
        action: ``approve``; ``edit`` (run with ``args``: values that replace the named
            arguments, checked against the tool's schema); ``reject`` (the task's outcome
            is an error observation saying so, with ``reason``; its dependents are
            skipped).
    """

    run_id: str
    round: int
    task_id: int
    action: Literal["approve", "edit", "reject"] = "approve"
    args: dict[str, Any] | None = None
    reason: str = ""
    event_id: str = Field(default_factory=_event_id)


class JoinEvent(_RunEvent):
    """Emitted by the scheduler once the plan is complete and every task has a result."""

    round: int


class ReplanEvent(_RunEvent):
    """Emitted by the joiner when it decides to plan again; consumed by the planner.

    ``round`` is the new round's number; ``reason`` is the joiner's Replan(...) text.
    """

    round: int
    reason: str
    thought: str | None = None


class CompilerStream(AgentStream):
    """Planner or joiner tokens; emitted by the planner and the joiner, for UIs.

    ``delta`` is the new text. ``phase`` and ``round`` say whose tokens they are.
    ``response`` (the whole text so far) is there in process, as on every
    ``AgentStream``, but is not serialized: over HTTP each event carries only its delta.
    ``raw`` repeats ``{"phase": ..., "round": ...}`` for older consumers.
    """

    response: str = Field(default="", exclude=True)
    phase: Literal["plan", "join"] = "plan"
    round: int = 0
    _data: dict[str, Any] = PrivateAttr(default={})  # see _RunEvent._data


class CompiledPlan(BaseModel):
    """A plan compiled but not run: the result of a ``plan_only`` run.

    Attributes:
        tasks: The tasks, checked against the tools (``error`` set where a line cannot run).
        errors: Plan-level problems. ``text``: the planner's raw output.
        thoughts: The planner's thoughts. ``join_id``: the id of its ``join()``.
        llm_call: The planner call that made the plan: its tokens, cost and timing.
        policies: The policy of each tool the plan calls, as JSON.
    """

    tasks: list[PlanTask] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)
    text: str = ""
    thoughts: list[str] = Field(default_factory=list)
    join_id: int | None = None
    llm_call: LLMCallUsage | None = None
    policies: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """The policy of each tool the plan calls (side effect, approval, limits, retry)."""

    error_kinds: list[PlanErrorKind] = Field(default_factory=list)
    """The kind of each plan-level error."""

    @model_validator(mode="before")
    @classmethod
    def _error_kinds(cls, data: Any) -> Any:
        return kinds_given(data, "errors", "error_kinds")

    @property
    def valid(self) -> bool:
        """Every line runs and the plan is well formed."""
        return not self.errors and all(t.error is None for t in self.tasks)


class PlanApprovalRequest(InputRequiredEvent):
    """Emitted by the planner in ``approve`` mode: the round's plan, waiting for a human.

    Answer with :meth:`respond` (``handler.ctx.send_event(request.respond())``, or a
    workflow server's ``POST /events/{handler_id}`` with the same ``run_id`` and ``round``).
    """

    round: int
    run_id: str = ""
    plan: CompiledPlan = Field(default_factory=CompiledPlan)

    def respond(
        self,
        action: Literal["approve", "edit", "reject"] = "approve",
        plan_text: str | None = None,
        reason: str = "",
    ) -> PlanApprovalResponse:
        """The verdict on this plan, naming the run and round it answers."""
        return PlanApprovalResponse(
            run_id=self.run_id, round=self.round, action=action, plan_text=plan_text, reason=reason
        )


class PlanApprovalResponse(HumanResponseEvent):
    """A human's verdict on a plan: approve it, run an edited plan text, or reject it.

    Attributes:
        run_id: The run whose plan this answers (the request's ``run_id``).
        round: The round whose plan this answers (the request's ``round``); a response
            naming another run or round is ignored, so a late duplicate never approves a
            plan nobody saw.
        action: ``approve``, ``edit`` (run ``plan_text`` instead, parsed like the
            planner's output) or ``reject`` (the run ends, answering with ``reason``).
    """

    run_id: str
    round: int
    action: Literal["approve", "edit", "reject"] = "approve"
    plan_text: str | None = None
    reason: str = ""
