"""A served run as the protocol surfaces see it (OpenAI-compatible, MCP, A2A, AG-UI).

Each surface starts an ordinary run of the workflow server (listed in ``/handlers``,
persisted, cancellable, resumed after a restart), follows its stored events and answers
its held tasks through one :class:`ServedRuns`, so the runs, events, durability and
verdict rules are the same whatever protocol a client speaks. :meth:`ServedRuns.follow`
yields the run's compiler events, then one closing item: :class:`Ended` (an answer or a
failure) or :class:`Awaiting` (only held tasks are left: the run waits for verdicts,
which :meth:`ServedRuns.answer` checks and sends).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llama_index.core.llms import ChatMessage
from workflows import Workflow
from workflows.events import Event

from llm_compiler import _upstream
from llm_compiler.errors import Unavailable
from llm_compiler.events import (
    AwaitingApproval,
    CompilerStream,
    PlanEvent,
    ReplanEvent,
    TaskApprovalRequest,
    TaskApprovalResponse,
    TaskReady,
    TaskResult,
    TaskStarted,
    TaskWaiting,
)
from llm_compiler.serving.guard import BadRequest
from llm_compiler.serving.verdicts import check_task_verdict

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore, WorkflowServer

    from llm_compiler._upstream import StoredEvent

#: The compiler events a surface is shown, by the type name they are stored under.
SHOWN: dict[str, type[Event]] = {
    c.__name__: c
    for c in (
        PlanEvent,
        TaskReady,
        TaskResult,
        CompilerStream,
        ReplanEvent,
        TaskApprovalRequest,
        TaskWaiting,
        TaskStarted,
        AwaitingApproval,
    )
}
#: Stored terminal events that end a run without an answer.
FAILED = {"WorkflowFailedEvent", "WorkflowTimedOutEvent", "WorkflowCancelledEvent"}
#: Characters of a task's output a progress line shows.
PROGRESS_CHARS = 300


@dataclass(frozen=True)
class RunRef:
    """A started run: the server's handler id and the run's own id."""

    handler_id: str
    run_id: str


@dataclass(frozen=True)
class Ended:
    """The run ended: with `answer`, or with `error` (failed, timed out, cancelled)."""

    answer: str | None = None
    error: str | None = None
    cancelled: bool = False
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def usage(self) -> dict[str, int]:
        """The run's token counts (``prompt_tokens``, ``completion_tokens``, ...)."""
        usage = self.summary.get("usage") or {}
        return {k: v for k, v in usage.items() if isinstance(v, int)}


@dataclass(frozen=True)
class Awaiting:
    """Only held tasks are left: the run waits for a verdict on each of `held`."""

    held: list[TaskApprovalRequest]
    sequence: int = -1
    """The sequence of the run's event that said so (follow the run after it)."""

    def message(self) -> str:
        """The held calls and their approval ids, in words."""
        lines = ["The run waits for approval of:"]
        for request in self.held:
            lines.append(f"- {held_call(request)}, approval id {request.approval_id}")
        lines.append("Answer each with approve, edit (new arguments) or reject.")
        return "\n".join(lines)


def approval(request: TaskApprovalRequest) -> dict[str, Any]:
    """A held call as the surfaces list it: its approval id, task, tool and arguments."""
    return {
        "approval_id": request.approval_id,
        "task_id": request.task_id,
        "tool": request.tool_name,
        "args": request.args,
    }


def held_call(request: TaskApprovalRequest) -> str:
    """``task 3: pay({"amount": 100})``: a held call as a line of text."""
    args = ", ".join(f"{k}={v!r}" for k, v in request.args.items())
    return f"task {request.task_id}: {request.tool_name}({args})"


def progress_text(ev: Event) -> str:
    """What `ev` adds to a run's visible progress (the planner's and joiner's tokens, each
    task's start and outcome, holds and replans); empty for the rest."""
    if isinstance(ev, CompilerStream):
        return ev.delta
    if isinstance(ev, TaskReady):
        return f"\n[task {ev.task_id} {ev.tool_name} started]\n"
    if isinstance(ev, TaskResult):
        what = "skipped" if ev.skipped else "error" if ev.is_error else "done"
        output = str(ev.output)
        cut = output[:PROGRESS_CHARS] + ("…" if len(output) > PROGRESS_CHARS else "")
        return f"\n[task {ev.task_id} {ev.tool_name} {what}: {cut}]\n"
    if isinstance(ev, TaskApprovalRequest):
        return f"\n[{held_call(ev)} held for approval, id {ev.approval_id}]\n"
    if isinstance(ev, ReplanEvent):
        return f"\n[replan, round {ev.round}: {ev.reason}]\n"
    return ""


class ServedRuns:
    """Start, follow, answer and cancel runs of the served workflows.

    Args:
        server: The workflow server the runs run on.
        store: Its store (events are read from there).
        workflows: The served workflows by name.
    """

    def __init__(
        self,
        server: WorkflowServer,
        store: AbstractWorkflowStore,
        workflows: Mapping[str, Workflow],
    ) -> None:
        self.server = server
        self.store = store
        self.workflows = dict(workflows)

    async def start(
        self,
        name: str,
        question: str,
        history: Sequence[ChatMessage] = (),
        handler_id: str | None = None,
    ) -> RunRef:
        """Start a run of workflow `name` (see :func:`start_run`)."""
        return await start_run(self.server, name, question, history, handler_id)

    async def find_handler(self, handler_id: str) -> RunRef | None:
        """The run the server records as `handler_id` (None: there is none)."""
        from llama_agents.server import HandlerQuery

        found = await self.store.query(HandlerQuery(handler_id_in=[handler_id]))
        run_id = found[0].run_id if found else None
        return RunRef(handler_id, run_id) if run_id is not None else None

    async def outcome(self, run_id: str) -> tuple[int, Ended | Awaiting | None]:
        """Where the run is now, from its stored events: the sequence of its last event,
        and how it ended or what it waits for (None: it runs)."""
        held: dict[int, TaskApprovalRequest] = {}
        last, now = -1, None
        for stored in await self.store.query_events(run_id):
            item = _item(stored, held)
            last = stored.sequence
            if item is not None:
                now = item if isinstance(item, Ended | Awaiting) else None
        return last, now

    async def find(self, run_id: str) -> tuple[RunRef, str]:
        """The run `run_id` and its workflow's name; BadRequest 404 if there is none."""
        from llama_agents.server import HandlerQuery

        found = await self.store.query(HandlerQuery(run_id_in=[run_id]))
        if not found:
            raise BadRequest(404, f"No run {run_id!r}.")
        return RunRef(found[0].handler_id, run_id), found[0].workflow_name

    async def answer(self, verdicts: Sequence[TaskApprovalResponse]) -> tuple[RunRef, int]:
        """Check `verdicts` (all for one run) as ``POST /events`` does and send them.

        Returns the run and the sequence of its last event before them (follow it from
        there to see what they set off).
        """
        if len({v.run_id for v in verdicts}) != 1:
            raise BadRequest(400, "Give verdicts for one run at a time.")
        ref, name = await self.find(verdicts[0].run_id)
        workflow = _upstream.workflow_service(self.server).get_workflow(name)
        for verdict in verdicts:
            await check_task_verdict(self.store, workflow, ref.run_id, verdict)
        events = await self.store.query_events(ref.run_id)
        after = events[-1].sequence if events else -1
        for verdict in verdicts:
            await _upstream.workflow_service(self.server).send_event(ref.handler_id, verdict)
        return ref, after

    async def cancel(self, ref: RunRef) -> None:
        """Cancel the run (nothing if it has ended)."""
        await _upstream.workflow_service(self.server).cancel_handler(ref.handler_id)

    async def follow(
        self, run_id: str, after: int = -1
    ) -> AsyncIterator[tuple[int, Event | Ended | Awaiting]]:
        """The run's events after sequence `after` as (sequence, event), ending with an
        :class:`Ended` or an :class:`Awaiting` (the run itself goes on waiting)."""
        held: dict[int, TaskApprovalRequest] = {}
        async for stored in self.store.subscribe_events(run_id, after_sequence=-1):
            item = _item(stored, held)
            if item is None or stored.sequence <= after:
                continue
            yield stored.sequence, item
            if isinstance(item, Ended | Awaiting):
                return


async def start_run(
    server: WorkflowServer,
    name: str,
    question: str,
    history: Sequence[ChatMessage] = (),
    handler_id: str | None = None,
) -> RunRef:
    """Start a run of workflow `name` on `question` (after `history`) as run-nowait does,
    recorded as `handler_id` (default: a new id); BadRequest 404 for an unknown workflow."""
    # llama-agents-server 0.8.0 starts runs in process only through its service (the call
    # its run-nowait endpoint makes), so the run is persisted and listed like any other.
    service = _upstream.workflow_service(server)
    workflow = service.get_workflow(name)
    if workflow is None:
        raise BadRequest(404, f"Unknown workflow {name!r}.")
    start = workflow.start_event_class.model_validate(
        {"user_msg": question, "chat_history": list(history)}
    )
    try:  # through the admission, like every run (serving.admission)
        data = await service.start_workflow(
            workflow, handler_id or uuid.uuid4().hex, start_event=start
        )
    except Unavailable as e:
        raise BadRequest(e.status, e.detail) from None
    if data.run_id is None:
        raise BadRequest(409, f"The run of {name!r} did not start.")
    return RunRef(data.handler_id, data.run_id)


def _item(
    stored: StoredEvent, held: dict[int, TaskApprovalRequest]
) -> Event | Ended | Awaiting | None:
    """The compiler event, end or wait a stored event is (`held`: the run's held tasks)."""
    envelope = stored.event
    if envelope.type in FAILED:
        error = envelope.value.get("exception") or envelope.value.get("error")
        if isinstance(error, dict):  # a stored exception: its type and message
            error = error.get("exception_message") or error.get("exception_type")
        detail = error or envelope.type.removesuffix("Event").removeprefix("Workflow").lower()
        cancelled = envelope.type == "WorkflowCancelledEvent"
        return Ended(error=f"The run ended without an answer: {detail}", cancelled=cancelled)
    if "StopEvent" in {envelope.type, *(envelope.types or [])}:
        result = envelope.value.get("result")
        summary = result.get("summary") if isinstance(result, dict) else None
        return Ended(answer=answer_text(result), summary=summary or {})
    kind = SHOWN.get(envelope.type)
    if kind is None:
        return None
    event = kind.model_validate(envelope.value)
    if isinstance(event, TaskApprovalRequest):
        held[event.task_id] = event
    elif isinstance(event, TaskReady | TaskResult):
        held.pop(event.task_id, None)
    elif isinstance(event, AwaitingApproval):
        waiting = [held[t] for t in event.task_ids if t in held]
        return Awaiting(waiting, stored.sequence) if waiting else None
    return event


def answer_text(result: Any) -> str:
    """The answer text of a stored result (an agent's output is stored as its fields)."""
    from llama_index.core.agent.workflow import AgentOutput
    from pydantic import ValidationError

    if isinstance(result, dict) and "response" in result:
        try:
            return str(AgentOutput.model_validate(result))
        except ValidationError:
            pass
    return "" if result is None else str(result)
