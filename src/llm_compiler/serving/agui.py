"""AG-UI: a compiler run as an AG-UI event stream, for chat front-ends (CopilotKit, ...).

``POST /agui/{name}`` takes a ``RunAgentInput`` (the last user message is the question,
the messages before it the run's chat history), starts the run on the workflow server
like ``/workflows/{name}/run-nowait`` does (listed in ``/handlers``, persisted, cancellable,
resumed after a restart; its handler id is in the ``x-handler-id`` response header and a
``CUSTOM`` event named ``handler``) and streams its events from the store as AG-UI events
over SSE: ``RUN_STARTED``; the DAG as ``STATE_SNAPSHOT`` then
JSON-Patch ``STATE_DELTA``s; per task ``TOOL_CALL_START``/``ARGS``/``END`` when it starts
and ``TOOL_CALL_RESULT`` when it settles; the joiner's tokens as a reasoning message;
the answer as a text message; ``RUN_FINISHED`` (or ``RUN_ERROR``).

A task whose tool requires approval is ``held`` in the DAG state while the rest runs; when
nothing else can run, the turn ends with ``RUN_FINISHED`` whose outcome is an
``interrupt``, one per held task (its id is the task's approval id, its
``response_schema`` the verdict: ``action`` approve / edit / reject, ``args``,
``reason``). The client answers with a new ``RunAgentInput`` whose ``resume`` entries
name those ids (``resolved`` with the verdict as ``payload``; ``cancelled`` rejects), and
that request streams the rest of the same run. Slot waits and retries show in the state
(``waiting``, ``attempt``).

The adapter is written on ``ag-ui-protocol`` (types and encoder) rather than
``llama-index-protocols-ag-ui``: that package's router only forwards its own wrapper
events (a compiler run would show nothing) and needs fastapi.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from llama_index.core.llms import ChatMessage, MessageRole
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from workflows import Workflow
from workflows.events import StopEvent

from llm_compiler import _upstream
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
from llm_compiler.serving import runs
from llm_compiler.serving.guard import BadRequest, BodyRoute, Checked, field_errors, parsed
from llm_compiler.serving.runs import FAILED, SHOWN, answer_text
from llm_compiler.serving.verdicts import check_task_verdict, verdict_for

if TYPE_CHECKING:
    from ag_ui.core import BaseEvent, RunAgentInput
    from llama_agents.server import AbstractWorkflowStore, WorkflowServer

    from llm_compiler._upstream import StoredEvent

_MAX_RESULT_CHARS = 4000
#: The verdict a client sends as a resume entry's payload.
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "edit", "reject"], "default": "approve"},
        "args": {"type": "object", "description": "with edit: arguments that replace these"},
        "reason": {"type": "string"},
    },
}


class AGUITranslator:
    """Turns one run's compiler events into AG-UI events (pure; no I/O).

    Args:
        thread_id: The AG-UI thread.
        run_id: The AG-UI run (also prefixes tool call and message ids).
    """

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.state: dict[str, Any] = {"round": 0, "tasks": {}, "replans": [], "answer": None}
        self._started: set[int] = set()
        self._reasoning: str | None = None
        self._held: dict[int, TaskApprovalRequest] = {}

    def start(self, question: str) -> list[BaseEvent]:
        """The opening events: run started and the (empty) DAG state."""
        from ag_ui.core import RunStartedEvent, StateSnapshotEvent

        self.state["question"] = question
        return [
            RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id),
            StateSnapshotEvent(snapshot=json.loads(json.dumps(self.state))),
        ]

    def translate(self, ev: Any) -> list[BaseEvent]:
        """AG-UI events for one compiler event (none for events a chat UI does not show)."""
        if isinstance(ev, PlanEvent):
            return self._plan(ev)
        if isinstance(ev, TaskReady):
            return self._ready(ev)
        if isinstance(ev, TaskResult):
            return self._result(ev)
        if isinstance(ev, CompilerStream) and ev.phase == "join":
            return self._reason(ev.delta)
        if isinstance(ev, ReplanEvent):
            return self._replan(ev)
        if isinstance(ev, StopEvent):
            return self._finish(str(ev.result))
        return self._policy_event(ev)

    def _policy_event(self, ev: Any) -> list[BaseEvent]:
        """Held tasks, slot waits, retries, and the interrupt when only held tasks remain."""
        if isinstance(ev, TaskApprovalRequest):
            self._held[ev.task_id] = ev
            ops = self._set(ev.task_id, state="held")
            if ops:
                path = f"/tasks/{ev.task_id}/policy"
                ops.append({"op": "add", "path": path, "value": ev.policy})
            return self._patch(*ops) if ops else []
        if isinstance(ev, TaskWaiting):
            return self._patch(*self._set(ev.task_id, state="waiting", waiting=ev.slot))
        if isinstance(ev, TaskStarted) and str(ev.task_id) in self.state["tasks"]:
            attempt = {"n": ev.attempt, "of": ev.attempts, "error": ev.error}
            return self._patch(
                {"op": "add", "path": f"/tasks/{ev.task_id}/attempt", "value": attempt}
            )
        if isinstance(ev, AwaitingApproval):
            return self._interrupt(ev)
        return []

    def _interrupt(self, ev: AwaitingApproval) -> list[BaseEvent]:
        from ag_ui.core import Interrupt, RunFinishedEvent, RunFinishedInterruptOutcome

        interrupts = []
        for task_id in ev.task_ids:
            held = self._held.get(task_id)
            if held is None:
                continue
            call = f"{held.tool_name}({json.dumps(held.args, default=str)})"
            interrupts.append(
                Interrupt(
                    id=held.approval_id,
                    reason="tool_approval",
                    message=f"Task {task_id}: {call} waits for approval.",
                    tool_call_id=self._call_id(task_id),
                    response_schema=VERDICT_SCHEMA,
                    metadata={"task_id": task_id, "tool": held.tool_name, "args": held.args},
                )
            )
        if not interrupts:
            return []
        outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
        finished = RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, outcome=outcome)
        return [*self._end_reasoning(), finished]

    def fail(self, message: str) -> list[BaseEvent]:
        """The closing event of a failed run."""
        from ag_ui.core import RunErrorEvent

        return [*self._end_reasoning(), RunErrorEvent(message=message)]

    def _call_id(self, task_id: int) -> str:
        return f"{self.run_id}-task-{task_id}"

    def _patch(self, *ops: dict[str, Any]) -> list[BaseEvent]:
        from ag_ui.core import StateDeltaEvent

        return [StateDeltaEvent(delta=list(ops))]  # type: ignore[arg-type]  # plain JSON Patch

    def _plan(self, ev: PlanEvent) -> list[BaseEvent]:
        ops = self._drop_round(ev.round) if ev.replaces else []
        for task in ev.tasks:
            key = str(task.id)
            if task.is_join or key in self.state["tasks"]:
                continue
            node = {
                "id": task.id,
                "round": task.round,
                "tool": task.tool,
                "line": task.text,
                "deps": task.deps,
                "state": "error" if task.error else "planned",
                "error": task.error,
                "waiting": None,
            }
            self.state["tasks"][key] = node
            ops.append({"op": "add", "path": f"/tasks/{key}", "value": node})
        return self._patch(*ops) if ops else []

    def _drop_round(self, round: int) -> list[dict[str, Any]]:
        """Remove the tasks of `round` (a plan that replaces them follows)."""
        tasks = self.state["tasks"]
        gone = [key for key, node in tasks.items() if node["round"] == round]
        for key in gone:
            del tasks[key]
        return [{"op": "remove", "path": f"/tasks/{key}"} for key in gone]

    def _set(self, task_id: int, **fields: Any) -> list[dict[str, Any]]:
        node = self.state["tasks"].get(str(task_id))
        if node is None:
            return []
        node.update(fields)
        return [
            {"op": "replace", "path": f"/tasks/{task_id}/{k}", "value": v}
            for k, v in fields.items()
            if k in node
        ]

    def _tool_call(self, task_id: int, tool: str, args: Mapping[str, Any]) -> list[BaseEvent]:
        from ag_ui.core import ToolCallArgsEvent, ToolCallEndEvent, ToolCallStartEvent

        self._started.add(task_id)
        call_id = self._call_id(task_id)
        return [
            ToolCallStartEvent(tool_call_id=call_id, tool_call_name=tool),
            ToolCallArgsEvent(tool_call_id=call_id, delta=json.dumps(args, default=str)),
            ToolCallEndEvent(tool_call_id=call_id),
        ]

    def _ready(self, ev: TaskReady) -> list[BaseEvent]:
        self.state["tasks"].get(str(ev.task_id), {}).setdefault("args", ev.args)
        events = self._tool_call(ev.task_id, ev.tool_name, ev.args)
        return events + self._patch(*self._set(ev.task_id, state="running", waiting=None))

    def _result(self, ev: TaskResult) -> list[BaseEvent]:
        from ag_ui.core import ToolCallResultEvent

        events = (
            [] if ev.task_id in self._started else self._tool_call(ev.task_id, ev.tool_name, {})
        )
        output = str(ev.output)[:_MAX_RESULT_CHARS]
        events.append(
            ToolCallResultEvent(
                message_id=f"{self._call_id(ev.task_id)}-result",
                tool_call_id=self._call_id(ev.task_id),
                content=output,
                role="tool",
            )
        )
        state = "skipped" if ev.skipped else "error" if ev.is_error else "done"
        ops = self._set(ev.task_id, state=state, error=output if ev.is_error else None)
        ops.append({"op": "add", "path": f"/tasks/{ev.task_id}/output", "value": output})
        ops.append({"op": "add", "path": f"/tasks/{ev.task_id}/duration", "value": ev.duration})
        return events + (self._patch(*ops) if str(ev.task_id) in self.state["tasks"] else [])

    def _reason(self, delta: str) -> list[BaseEvent]:
        from ag_ui.core import (
            ReasoningMessageContentEvent,
            ReasoningMessageStartEvent,
            ReasoningStartEvent,
        )

        events: list[BaseEvent] = []
        if self._reasoning is None:
            self._reasoning = f"{self.run_id}-reasoning-{uuid.uuid4().hex[:8]}"
            events.append(ReasoningStartEvent(message_id=self._reasoning))
            events.append(ReasoningMessageStartEvent(message_id=self._reasoning, role="reasoning"))
        if delta:
            events.append(ReasoningMessageContentEvent(message_id=self._reasoning, delta=delta))
        return events

    def _end_reasoning(self) -> list[BaseEvent]:
        from ag_ui.core import ReasoningEndEvent, ReasoningMessageEndEvent

        if self._reasoning is None:
            return []
        message_id, self._reasoning = self._reasoning, None
        return [
            ReasoningMessageEndEvent(message_id=message_id),
            ReasoningEndEvent(message_id=message_id),
        ]

    def _replan(self, ev: ReplanEvent) -> list[BaseEvent]:
        self.state["round"] = ev.round
        self.state["replans"].append({"round": ev.round, "reason": ev.reason})
        return [
            *self._end_reasoning(),
            *self._patch(
                {"op": "replace", "path": "/round", "value": ev.round},
                {
                    "op": "add",
                    "path": "/replans/-",
                    "value": {"round": ev.round, "reason": ev.reason},
                },
            ),
        ]

    def _finish(self, answer: str) -> list[BaseEvent]:
        from ag_ui.core import (
            RunFinishedEvent,
            TextMessageContentEvent,
            TextMessageEndEvent,
            TextMessageStartEvent,
        )

        message_id = f"{self.run_id}-answer"
        self.state["answer"] = answer
        return [
            *self._end_reasoning(),
            TextMessageStartEvent(message_id=message_id, role="assistant"),
            TextMessageContentEvent(message_id=message_id, delta=answer or " "),
            TextMessageEndEvent(message_id=message_id),
            *self._patch({"op": "replace", "path": "/answer", "value": answer}),
            RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=answer),
        ]


#: AG-UI roles kept in the chat history; tool results (without the calls they answer),
#: reasoning and activity messages are the front-end's, not the conversation's.
_ROLES = {
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
    "system": MessageRole.SYSTEM,
    "developer": MessageRole.SYSTEM,
}


@dataclass(frozen=True)
class ChatTurn:
    """What a ``RunAgentInput`` asks: the question and the conversation before it."""

    thread_id: str
    run_id: str
    question: str
    history: list[ChatMessage]


def run_input_of(data: Mapping[str, Any]) -> RunAgentInput:
    """`data` as a ``RunAgentInput``, or :class:`BadRequest`."""
    from ag_ui.core import RunAgentInput
    from pydantic import ValidationError

    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as e:
        raise BadRequest(400, f"Not an AG-UI RunAgentInput: {field_errors(e)}") from None


def verdicts_of(run_input: RunAgentInput) -> list[TaskApprovalResponse]:
    """The verdicts a ``RunAgentInput``'s ``resume`` entries give (none: a new question).

    An entry's ``interrupt_id`` is a held task's approval id (``run_id:round:task_id``);
    ``resolved`` takes the verdict from ``payload`` (default approve), ``cancelled``
    rejects. Every entry must name the same run.
    """

    verdicts = []
    for entry in run_input.resume or ():
        payload = entry.payload if isinstance(entry.payload, dict) else {}
        if entry.status == "cancelled":
            payload = {"action": "reject", "reason": payload.get("reason") or "cancelled"}
        verdicts.append(verdict_for(entry.interrupt_id, payload))
    if len({v.run_id for v in verdicts}) > 1:
        raise BadRequest(400, "The resume entries of one request must answer one run.")
    return verdicts


def question_of(data: Mapping[str, Any] | RunAgentInput) -> ChatTurn:
    """The turn a ``RunAgentInput`` body asks for, or :class:`BadRequest`."""
    run_input = data if not isinstance(data, Mapping) else run_input_of(data)
    users = [i for i, m in enumerate(run_input.messages) if m.role == "user"]
    last = users[-1] if users else None
    question = _text(run_input.messages[last].content) if last is not None else ""
    if not question.strip():
        raise BadRequest(400, "The last user message must be a non-empty question.")
    history = _history(run_input, last or 0)
    return ChatTurn(run_input.thread_id, run_input.run_id, question.strip(), history)


def _text(content: Any) -> str:
    """A message's text (the text parts of a multimodal one)."""
    if isinstance(content, list):
        return " ".join(getattr(part, "text", "") or "" for part in content)
    return content if isinstance(content, str) else ""


def _history(run_input: RunAgentInput, upto: int) -> list[ChatMessage]:
    """The user, assistant and system messages with text before the question."""
    history = []
    for message in run_input.messages[:upto]:
        text = _text(getattr(message, "content", None))
        if message.role in _ROLES and text.strip():
            history.append(ChatMessage(role=_ROLES[message.role], content=text))
    return history


async def start_run(server: WorkflowServer, name: str, turn: ChatTurn) -> tuple[str, str]:
    """Start `turn` on the server's workflow `name` as run-nowait does: (handler id, run id)."""
    ref = await runs.start_run(server, name, turn.question, turn.history)
    return ref.handler_id, ref.run_id


async def resume_run(
    server: WorkflowServer,
    store: AbstractWorkflowStore,
    run_input: RunAgentInput,
    verdicts: list[TaskApprovalResponse],
) -> tuple[ChatTurn, tuple[str, str], AGUITranslator, int]:
    """Send `verdicts` to the run they answer (checked as ``POST /events`` checks them).

    Returns the turn, the run's (handler id, run id), a translator that has seen the run's
    events so far, and the sequence to stream after.
    """
    from llama_agents.server import HandlerQuery

    run_id = verdicts[0].run_id
    found = await store.query(HandlerQuery(run_id_in=[run_id]))
    if not found:
        raise BadRequest(404, f"No run {run_id!r} to resume.")
    workflow = _upstream.workflow_service(server).get_workflow(found[0].workflow_name)
    for verdict in verdicts:
        await check_task_verdict(store, workflow, run_id, verdict)
    translator = AGUITranslator(run_input.thread_id, run_input.run_id)
    after = -1
    for stored in await store.query_events(run_id):
        _translate(translator, stored)
        after = stored.sequence
    for verdict in verdicts:
        await _upstream.workflow_service(server).send_event(found[0].handler_id, verdict)
    question = str(translator.state.get("question") or "")
    turn = ChatTurn(run_input.thread_id, run_input.run_id, question, [])
    return turn, (found[0].handler_id, run_id), translator, after


async def agui_events(
    server: WorkflowServer,
    store: AbstractWorkflowStore,
    turn: ChatTurn,
    ids: tuple[str, str],
    gone: Callable[[], Awaitable[bool]],
    translator: AGUITranslator | None = None,
    after: int = -1,
) -> AsyncIterator[str]:
    """Yield the AG-UI events (SSE lines) of the stored run `ids` (handler id, run id),
    after sequence `after` (a resumed turn: `translator` has seen the ones before).

    If the stream stops before the run ends, the run is cancelled when the client went
    away (`gone`), and kept when the server is shutting down (it resumes on restart).
    """
    from ag_ui.core import CustomEvent
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    translator = translator or AGUITranslator(turn.thread_id, turn.run_id)
    handler_id, run_id = ids
    for event in translator.start(turn.question or translator.state.get("question", "")):
        yield encoder.encode(event)
    yield encoder.encode(CustomEvent(name="handler", value={"handler_id": handler_id}))
    ended = False
    try:
        async for stored in store.subscribe_events(run_id, after_sequence=after):
            events, ended = _translate(translator, stored)
            for event in events:
                yield encoder.encode(event)
            if ended:
                break  # the run's end, or an interrupt: the turn is over
    finally:
        if not ended:
            with anyio.CancelScope(shield=True):  # this task is being cancelled
                if await gone():
                    await _upstream.workflow_service(server).cancel_handler(handler_id)


def _translate(translator: AGUITranslator, stored: StoredEvent) -> tuple[list[BaseEvent], bool]:
    """AG-UI events for one stored event, and whether it ended the run."""
    envelope = stored.event
    kinds = {envelope.type, *(envelope.types or [])}
    if envelope.type in FAILED:
        error = envelope.value.get("exception") or envelope.value.get("error")
        if isinstance(error, dict):  # a stored exception: its type and message
            error = error.get("exception_message") or error.get("exception_type")
        detail = error or envelope.type.removesuffix("Event").removeprefix("Workflow").lower()
        return translator.fail(f"The run ended without an answer: {detail}"), True
    if "StopEvent" in kinds:
        return translator.translate(
            StopEvent(result=answer_text(envelope.value.get("result")))
        ), True
    shown = SHOWN.get(envelope.type)
    if shown is None:
        return [], False
    events = translator.translate(shown.model_validate(envelope.value))
    return events, shown is AwaitingApproval and bool(events)


AGUI_PATH = re.compile(r"^/agui/(?P<name>[^/]+)/?$")


@dataclass(frozen=True)
class Resumption:
    """A ``RunAgentInput`` whose ``resume`` entries answer a run's interrupts."""

    run_input: RunAgentInput
    verdicts: list[TaskApprovalResponse]


def agui_body_route(workflows: Mapping[str, Workflow]) -> BodyRoute:
    """The validator of ``POST /agui/{name}``: a known workflow and a :class:`ChatTurn`, or
    a :class:`Resumption`."""

    async def validate(match: re.Match[str], data: dict[str, Any], body: bytes) -> Checked:
        if match["name"] not in workflows:
            raise BadRequest(404, f"Unknown workflow {match['name']!r}.")
        run_input = run_input_of(data)
        verdicts = verdicts_of(run_input)
        if verdicts:
            return Checked(Resumption(run_input, verdicts), body)
        return Checked(question_of(run_input), body)

    return BodyRoute(AGUI_PATH, validate)


def agui_route(server: WorkflowServer, store: AbstractWorkflowStore) -> Route:
    """The ``POST /agui/{name}`` route: runs on `server`, streamed from `store`.

    Its body was checked by :func:`agui_body_route` in front.
    """

    async def endpoint(request: Request) -> Response:
        asked: ChatTurn | Resumption = parsed(request.scope)
        translator, after = None, -1
        try:
            if isinstance(asked, Resumption):
                turn, ids, translator, after = await resume_run(
                    server, store, asked.run_input, asked.verdicts
                )
            else:
                turn = asked
                ids = await start_run(server, request.path_params["name"], turn)
        except BadRequest as e:
            return JSONResponse(e.body(), status_code=e.status)
        gone = request.is_disconnected
        stream = agui_events(server, store, turn, ids, gone, translator, after)
        headers = {"x-handler-id": ids[0], "cache-control": "no-cache"}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    return Route("/agui/{name}", endpoint, methods=["POST"])
