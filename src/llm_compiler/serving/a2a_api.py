"""A2A: the served compiler as an A2A 1.0 agent, on the official ``a2a-sdk``.

``GET /.well-known/agent-card.json`` describes it (a skill per served workflow and per tool
of the default one; JSON-RPC at ``/a2a``; streaming). ``SendMessage``,
``SendStreamingMessage``, ``GetTask`` and ``CancelTask`` are the SDK's JSON-RPC methods; a
message starts an ordinary run of the workflow server (the default workflow, or the one
its metadata names under ``workflow``), under the same token, origin and body rules as
the native API.

A run's states map onto the task's: working while it runs (each task's start and
outcome, each held call and replan is a status message); ``input-required`` when only
held calls are left, its message naming each call and carrying a data part
``{"approvals": [{"approval_id", "task_id", "tool", "args"}]}``; ``completed`` with the
answer as an artifact; ``failed`` or ``canceled``. A message to an ``input-required``
task is the verdict: data parts ``{"approval_id", "action": "approve" | "edit" |
"reject", "args", "reason"}`` (``approval_id`` may be left out when one call is held),
checked as ``POST /events`` checks them; one that does not fit leaves the task
``input-required`` with the reason.

A task is its run: its id is the run's handler id (its context id the same), and what
``GetTask``, a reply or ``SubscribeToTask`` find is read from the run's stored events
(:class:`RunTasks`, :class:`RunEvents`), so any worker of a durable store answers them,
after a restart too; nothing of a task stays in memory once it ends, and a task waiting
for input leaves memory after :data:`PARKED_SECONDS`. The card is public (clients read
it before they have a token) and, when the server has a token, declares the bearer scheme.
"""

import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import (
    AgentExecutor,
    RequestContext,
    SimpleRequestContextBuilder,
)
from a2a.server.cluster.event_stream import TaskEventStream, VersionedEvent
from a2a.server.cluster.task_store import StoredTask, VersionedTaskStore
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.events import Event, EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Artifact,
    HTTPAuthSecurityScheme,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a.utils.errors import UnsupportedOperationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from workflows import Workflow

from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.events import TaskApprovalResponse
from llm_compiler.serving.guard import BadRequest
from llm_compiler.serving.mcp_api import milestone
from llm_compiler.serving.runs import Awaiting, Ended, RunRef, ServedRuns, approval
from llm_compiler.serving.verdicts import verdict_for

A2A_PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
#: Seconds a task waiting for a verdict stays in a worker's memory (a reply reads it back).
PARKED_SECONDS = 60.0
#: The card's name for the bearer token scheme.
BEARER = "bearer"


def _version() -> str:
    try:
        return version("llm-compiler")
    except PackageNotFoundError:  # a source tree without an install
        return "0"


def agent_card(
    workflows: Mapping[str, Workflow],
    default: str,
    url: str,
    question: str,
    token_required: bool = False,
) -> AgentCard:
    """The agent card: a skill per workflow (its tools as tags) and per tool of `default`;
    with `token_required`, the bearer scheme every call needs."""
    skills = []
    for name, workflow in workflows.items():
        tools = sorted(workflow.tools) if isinstance(workflow, LLMCompilerWorkflow) else []
        described = f"Plans the tool calls a question needs ({', '.join(tools) or 'its tools'}), "
        skills.append(
            AgentSkill(
                id=name,
                name=name,
                description=described + "runs them in parallel and answers.",
                tags=["llmcompiler", *tools],
                examples=[question] if name == default else [],
            )
        )
    main = workflows[default]
    for tool in main.tools.values() if isinstance(main, LLMCompilerWorkflow) else ():
        description = (tool.metadata.description or tool.metadata.get_name()).strip()
        name = tool.metadata.get_name()
        skills.append(
            AgentSkill(id=f"{default}.{name}", name=name, description=description, tags=[name])
        )
    return AgentCard(
        name="llm-compiler",
        description=f"An LLMCompiler agent ({default}): plans tool calls as a DAG, runs each "
        "as soon as its inputs exist, and answers; held calls wait for a human's verdict.",
        version=_version(),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain", "application/json"],
        capabilities=AgentCapabilities(streaming=True),
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=url)
        ],
        skills=skills,
        **(_bearer() if token_required else {}),
    )


def _bearer() -> dict[str, Any]:
    """The card's fields saying every call needs ``Authorization: Bearer <token>``."""
    scheme = HTTPAuthSecurityScheme(
        scheme="Bearer", description="The server's token (LLM_COMPILER_TOKEN)."
    )
    return {
        "security_schemes": {BEARER: SecurityScheme(http_auth_security_scheme=scheme)},
        "security_requirements": [SecurityRequirement(schemes={BEARER: StringList()})],
    }


class CompilerExecutor(AgentExecutor):
    """Runs A2A tasks as served runs: a question starts one (recorded under the task's id),
    a verdict answers its held calls (see the module's doc). It keeps nothing per task."""

    def __init__(self, runs: ServedRuns, default: str) -> None:
        self.runs = runs
        self.default = default

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Start or resume the task's run and follow it to its end or its next wait."""
        task = context.current_task
        asked = task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        if task is None:
            if context.message is None:
                raise ValueError("A message starts a task.")
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        try:
            ref, after = await (self._answer(context, task) if asked else self._start(context))
        except BadRequest as e:
            await self._refuse(updater, e.detail, asked)
            return
        await updater.start_work()
        async for _, item in self.runs.follow(ref.run_id, after):
            for event in updates(item, task.id, task.context_id):
                await event_queue.enqueue_event(event)

    async def _start(self, context: RequestContext) -> tuple[RunRef, int]:
        question = context.get_user_input().strip()
        if not question:
            raise BadRequest(400, "Send the question as a text part.")
        name = str(context.metadata.get("workflow") or self.default)
        return await self.runs.start(name, question, handler_id=context.task_id), -1

    async def _answer(self, context: RequestContext, task: Task) -> tuple[RunRef, int]:
        parts = context.message.parts if context.message is not None else []
        ref = await self.runs.find_handler(task.id)
        _, now = await self.runs.outcome(ref.run_id) if ref is not None else (-1, None)
        held = [r.approval_id for r in now.held] if isinstance(now, Awaiting) else []
        return await self.runs.answer(verdicts_in(get_data_parts(parts), held))

    async def _refuse(self, updater: TaskUpdater, detail: str, asked: bool) -> None:
        message = updater.new_agent_message([new_text_part(detail)])
        if asked:  # the held calls stay held: the task still waits for a verdict
            await updater.requires_input(message)
        else:
            await updater.reject(message)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run, and the task."""
        ref = await self.runs.find_handler(context.task_id or "")
        if ref is not None:
            await self.runs.cancel(ref)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def updates(item: Any, task_id: str, context_id: str) -> list[Event]:
    """The task's events for an item of :meth:`ServedRuns.follow`: a status message per
    milestone, ``input-required`` with the held calls, the answer and the end."""
    if isinstance(item, Ended):
        return _ended(item, task_id, context_id)
    if isinstance(item, Awaiting):
        data = new_data_part({"approvals": [approval(r) for r in item.held]})
        parts = [new_text_part(item.message()), data]
        return [_status(TaskState.TASK_STATE_INPUT_REQUIRED, task_id, context_id, parts)]
    text = milestone(item)
    working = _status(TaskState.TASK_STATE_WORKING, task_id, context_id, [new_text_part(text)])
    return [working] if text else []


def _ended(item: Ended, task_id: str, context_id: str) -> list[Event]:
    """The answer as the ``answer`` artifact and ``completed``; ``canceled``; ``failed``."""
    if item.answer is not None:
        parts = [new_text_part(item.answer)]
        answer = Artifact(artifact_id="answer", name="answer", parts=parts)
        return [
            TaskArtifactUpdateEvent(task_id=task_id, context_id=context_id, artifact=answer),
            _status(TaskState.TASK_STATE_COMPLETED, task_id, context_id, []),
        ]
    if item.cancelled:
        return [_status(TaskState.TASK_STATE_CANCELED, task_id, context_id, [])]
    error = [new_text_part(item.error or "The run ended without an answer.")]
    return [_status(TaskState.TASK_STATE_FAILED, task_id, context_id, error)]


def _status(
    state: TaskState, task_id: str, context_id: str, parts: list[Part]
) -> TaskStatusUpdateEvent:
    """A status update now, with an agent message of `parts` if there are any."""
    status = TaskStatus(state=state)
    if parts:
        status.message.CopyFrom(
            Message(
                role=Role.ROLE_AGENT,
                message_id=uuid.uuid4().hex,
                task_id=task_id,
                context_id=context_id,
                parts=parts,
            )
        )
    status.timestamp.GetCurrentTime()
    return TaskStatusUpdateEvent(task_id=task_id, context_id=context_id, status=status)


def _task_version(sequence: int) -> TaskVersion:
    """A task's version after the run's event `sequence` (-1: none yet; never MISSING)."""
    return TaskVersion(sequence + 2)


def _sequence(version: TaskVersion) -> int:
    """The run's last event a task's `version` had seen (-1: none)."""
    return -1 if version.is_missing else int(version._value) - 2  # noqa: SLF001


class RunTasks(VersionedTaskStore):
    """The A2A task store over the runs: a task is read from the run its id names (any
    worker, any time the store keeps the run); the SDK's writes change nothing but a
    cancel, which cancels the run."""

    def __init__(self, runs: ServedRuns) -> None:
        self.runs = runs

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        """The task as its run stands (None: no such run)."""
        ref = await self.runs.find_handler(task_id)
        if ref is None:
            return None
        last, now = await self.runs.outcome(ref.run_id)
        task = Task(id=task_id, context_id=task_id)
        task.status.state = TaskState.TASK_STATE_WORKING
        for event in updates(now, task_id, task_id) if now is not None else []:
            if isinstance(event, TaskStatusUpdateEvent):
                task.status.CopyFrom(event.status)
            elif isinstance(event, TaskArtifactUpdateEvent):
                task.artifacts.append(event.artifact)
        return StoredTask(task, _task_version(last))

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        """Nothing to keep (the run is the record); a task canceled cancels its run."""
        if task.status.state == TaskState.TASK_STATE_CANCELED:
            ref = await self.runs.find_handler(task.id)
            if ref is not None:
                await self.runs.cancel(ref)
        return TaskVersion.MISSING

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """Refused: the runs are listed by ``GET /api/runs``."""
        raise UnsupportedOperationError(message="List the runs with GET /api/runs.")

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        """Nothing: a run is deleted with the store's retention."""


class RunEvents(TaskEventStream):
    """A task's events, read from its run's stored events (a resubscribe on any worker)."""

    def __init__(self, runs: ServedRuns) -> None:
        self.runs = runs

    async def publish(self, task_id: str, event: VersionedEvent) -> None:
        """Nothing: the run's own events are the stream."""

    async def subscribe(
        self, task_id: str, *, after: TaskVersion
    ) -> AsyncGenerator[VersionedEvent, None]:
        """The task's events after `after`, to its end or its next wait."""
        ref = await self.runs.find_handler(task_id)
        if ref is None:
            return
        async for sequence, item in self.runs.follow(ref.run_id, _sequence(after)):
            for event in updates(item, task_id, task_id):
                yield VersionedEvent(event=event, version=_task_version(sequence))

    async def destroy(self, task_id: str) -> None:
        """Nothing kept per task."""


class TaskIsContext(SimpleRequestContextBuilder):
    """A new task gets a new id (its run's handler id); a task's context id is its id (the
    agent keeps no conversation across tasks, and a task's context must be known to every
    worker after a restart)."""

    def __init__(self) -> None:
        super().__init__(should_populate_referred_tasks=False, task_store=None)

    async def build(
        self,
        context: ServerCallContext,
        params: Any = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        """The request's context, with the task's id as its context id."""
        task_id = task_id or uuid.uuid4().hex
        return await super().build(context, params, task_id, task_id, task)


def verdicts_in(data: Sequence[Any], held: Sequence[str]) -> list[TaskApprovalResponse]:
    """The verdicts a reply's data parts give (a part without ``approval_id`` answers the one
    held call); BadRequest 400 if there are none."""
    verdicts = []
    for item in data:
        if not isinstance(item, dict):
            continue
        approval_id = item.get("approval_id") or (held[0] if len(held) == 1 else None)
        if not isinstance(approval_id, str):
            raise BadRequest(400, f"Name the call with approval_id: one of {', '.join(held)}.")
        verdicts.append(verdict_for(approval_id, item))
    if not verdicts:
        raise BadRequest(
            400,
            'Answer with a data part {"approval_id": ..., "action": "approve" | "edit" | '
            f'"reject", "args": {{...}}, "reason": ...}}; held: {", ".join(held) or "none"}.',
        )
    return verdicts


def a2a_routes(
    runs: ServedRuns, default: str, question: str, token_required: bool = False
) -> list[BaseRoute]:
    """The agent card and the JSON-RPC endpoint (`token_required`: the card says so)."""

    def card_for(request: Request) -> AgentCard:
        url = str(request.base_url).rstrip("/") + A2A_PATH
        return agent_card(runs.workflows, default, url, question, token_required)

    handler = DefaultRequestHandler(
        agent_executor=CompilerExecutor(runs, default),
        task_store=RunTasks(runs),
        agent_card=agent_card(runs.workflows, default, A2A_PATH, question, token_required),
        request_context_builder=TaskIsContext(),
        event_stream=RunEvents(runs),
        interrupted_task_timeout=PARKED_SECONDS,
    )

    async def card(request: Request) -> Response:
        return JSONResponse(agent_card_to_dict(card_for(request)))

    return [Route(CARD_PATH, card, methods=["GET"]), *create_jsonrpc_routes(handler, A2A_PATH)]
