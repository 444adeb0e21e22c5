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
"""

from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import anyio
from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from workflows import Workflow

from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.events import TaskApprovalResponse
from llm_compiler.serving.guard import BadRequest
from llm_compiler.serving.mcp_api import milestone
from llm_compiler.serving.runs import Awaiting, Ended, RunRef, ServedRuns
from llm_compiler.serving.verdicts import verdict_for

A2A_PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"


def _version() -> str:
    try:
        return version("llm-compiler")
    except PackageNotFoundError:  # a source tree without an install
        return "0"


def agent_card(
    workflows: Mapping[str, Workflow], default: str, url: str, question: str
) -> AgentCard:
    """The agent card: a skill per workflow (its tools as tags) and per tool of `default`."""
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
    )


class CompilerExecutor(AgentExecutor):
    """Runs A2A tasks as served runs: a question starts one, a verdict answers its held
    calls (see the module's doc)."""

    def __init__(self, runs: ServedRuns, default: str) -> None:
        self.runs = runs
        self.default = default
        self._runs: dict[str, RunRef] = {}
        self._held: dict[str, list[str]] = {}

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
        self._runs[task.id] = ref
        await updater.start_work()
        await self._follow(updater, task, ref, after)

    async def _start(self, context: RequestContext) -> tuple[RunRef, int]:
        question = context.get_user_input().strip()
        if not question:
            raise BadRequest(400, "Send the question as a text part.")
        name = str(context.metadata.get("workflow") or self.default)
        return await self.runs.start(name, question), -1

    async def _answer(self, context: RequestContext, task: Task) -> tuple[RunRef, int]:
        parts = context.message.parts if context.message is not None else []
        verdicts = verdicts_in(get_data_parts(parts), self._held.get(task.id, []))
        return await self.runs.answer(verdicts)

    async def _refuse(self, updater: TaskUpdater, detail: str, asked: bool) -> None:
        message = updater.new_agent_message([new_text_part(detail)])
        if asked:  # the held calls stay held: the task still waits for a verdict
            await updater.requires_input(message)
        else:
            await updater.reject(message)

    async def _follow(self, updater: TaskUpdater, task: Task, ref: RunRef, after: int) -> None:
        settled = False
        try:
            async for _, item in self.runs.follow(ref.run_id, after):
                if isinstance(item, Ended | Awaiting):
                    settled = True
                    await self._settle(updater, task, item)
                    return
                text = milestone(item)
                if text:
                    message = updater.new_agent_message([new_text_part(text)])
                    await updater.update_status(TaskState.TASK_STATE_WORKING, message)
        finally:
            if not settled:  # cancelled, or failed: the run goes too
                with anyio.CancelScope(shield=True):
                    await self.runs.cancel(ref)

    async def _settle(self, updater: TaskUpdater, task: Task, outcome: Ended | Awaiting) -> None:
        if isinstance(outcome, Awaiting):
            self._held[task.id] = [r.approval_id for r in outcome.held]
            approvals = [
                {
                    "approval_id": r.approval_id,
                    "task_id": r.task_id,
                    "tool": r.tool_name,
                    "args": r.args,
                }
                for r in outcome.held
            ]
            parts = [new_text_part(outcome.message()), new_data_part({"approvals": approvals})]
            await updater.requires_input(updater.new_agent_message(parts))
        elif outcome.answer is not None:
            await updater.add_artifact([new_text_part(outcome.answer)], name="answer")
            await updater.complete()
        elif outcome.cancelled:
            await updater.cancel()
        else:
            error = outcome.error or "The run ended without an answer."
            await updater.failed(updater.new_agent_message([new_text_part(error)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Cancel the task's run, and the task."""
        ref = self._runs.get(context.task_id or "")
        if ref is not None:
            await self.runs.cancel(ref)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


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


def a2a_routes(runs: ServedRuns, default: str, question: str) -> list[BaseRoute]:
    """The agent card and the JSON-RPC endpoint."""

    def card_for(request: Request) -> AgentCard:
        url = str(request.base_url).rstrip("/") + A2A_PATH
        return agent_card(runs.workflows, default, url, question)

    handler = DefaultRequestHandler(
        agent_executor=CompilerExecutor(runs, default),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card(runs.workflows, default, A2A_PATH, question),
    )

    async def card(request: Request) -> Response:
        return JSONResponse(agent_card_to_dict(card_for(request)))

    return [Route(CARD_PATH, card, methods=["GET"]), *create_jsonrpc_routes(handler, A2A_PATH)]
