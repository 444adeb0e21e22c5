"""Another served compiler as a tool: over A2A (``a2a-sdk``) or over MCP (``mcp``).

:func:`a2a_agent_tool` and :func:`mcp_agent_tool` make a tool that asks a remote agent
served by ``llm-compiler serve`` a question and returns its answer, so one compiler's plan
can call another's (and run it in parallel with its other calls). When the remote run
holds a call for approval, the tool writes a :class:`RemoteApprovalRequest` to the
calling run's event stream (its client sees it beside the run's own events), keeps
following the remote run, and returns its answer once someone has answered the held call
on the remote server (:func:`answer_remote` sends the verdict there).

Needs the ``serve`` extra (``a2a-sdk``, ``mcp``). A held call may wait for a human for a
long time: give the tool a ``ToolPolicy`` timeout to suit.
"""

# No ``from __future__ import annotations``: FunctionTool finds a tool's ``Context``
# parameter by its annotation object.
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx
from llama_index.core.tools import FunctionTool
from pydantic import Field
from workflows import Context
from workflows.events import Event

from llm_compiler.tools.results import ToolError


class RemoteApprovalRequest(Event):
    """A call held for approval in a remote agent's run, shown to the calling run's client.

    Answer it on the remote server (:func:`answer_remote`): over A2A, a message to
    ``remote_task`` with the verdict; over MCP, its ``answer_approval`` tool.
    """

    protocol: Literal["a2a", "mcp"]
    agent: str
    """The remote agent's URL (its base URL for A2A, its ``/mcp`` endpoint for MCP)."""
    approval_id: str
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    remote_task: str = ""
    """The remote A2A task (A2A only)."""


def _headers(token: str | None) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"} if token else {}


def a2a_agent_tool(url: str, name: str, description: str, token: str | None = None) -> FunctionTool:
    """A tool asking the A2A agent at `url` (a server's base URL) a question."""

    async def ask(question: str, ctx: Context) -> str:
        from a2a.client import A2ACardResolver
        from a2a.client.client import ClientConfig
        from a2a.client.client_factory import ClientFactory
        from a2a.types import SubscribeToTaskRequest

        async with httpx.AsyncClient(timeout=None, headers=_headers(token)) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
            client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)
            try:
                task = await _A2ATask.follow(client.send_message(_message(question)))
                while task.held:
                    # Subscribed before anyone hears of the hold: no update is missed.
                    updates = client.subscribe(SubscribeToTaskRequest(id=task.id))
                    await anext(updates)
                    for held in task.held:
                        ctx.write_event_to_stream(
                            RemoteApprovalRequest(
                                protocol="a2a", agent=url, remote_task=task.id, **held
                            )
                        )
                    task = await _A2ATask.follow(updates, task)
                return task.answer()
            finally:
                await client.close()

    return FunctionTool.from_defaults(async_fn=ask, name=name, description=description)


def _message(question: str, task_id: str = "", data: Mapping[str, Any] | None = None) -> Any:
    from a2a.helpers import new_data_part, new_text_part
    from a2a.types import Message, Role, SendMessageRequest

    part = new_data_part(dict(data)) if data is not None else new_text_part(question)
    message = Message(
        role=Role.ROLE_USER, parts=[part], message_id=uuid.uuid4().hex, task_id=task_id
    )
    return SendMessageRequest(message=message)


@dataclass
class _A2ATask:
    """What the updates of a remote A2A task said: its state, answer and held calls."""

    id: str = ""
    state: int = 0
    texts: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    async def follow(
        cls, updates: AsyncIterator[Any], task: "_A2ATask | None" = None
    ) -> "_A2ATask":
        """Read `updates` to the task's end or its next wait for input."""
        from a2a.types import TaskState

        seen = cls(id=task.id) if task is not None else cls()
        async for update in updates:
            seen.take(update)
            if seen.state in (
                TaskState.TASK_STATE_COMPLETED,
                TaskState.TASK_STATE_FAILED,
                TaskState.TASK_STATE_CANCELED,
                TaskState.TASK_STATE_REJECTED,
                TaskState.TASK_STATE_INPUT_REQUIRED,
            ):
                break
        return seen

    def take(self, update: Any) -> None:
        from a2a.helpers import get_artifact_text, get_data_parts
        from a2a.types import TaskState

        if update.HasField("task"):
            self.id, self.state = update.task.id, update.task.status.state
        elif update.HasField("status_update"):
            status = update.status_update.status
            self.id, self.state = update.status_update.task_id, status.state
            self.texts = [p.text for p in status.message.parts if p.text]
            if status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
                data = get_data_parts(status.message.parts)
                self.held = [
                    {"approval_id": a["approval_id"], "tool": a["tool"], "args": _whole(a["args"])}
                    for item in data
                    for a in item.get("approvals", [])
                ]
        elif update.HasField("artifact_update"):
            self.artifacts.append(get_artifact_text(update.artifact_update.artifact))

    def answer(self) -> str:
        from a2a.types import TaskState

        if self.state == TaskState.TASK_STATE_COMPLETED and self.artifacts:
            return self.artifacts[-1]
        raise ToolError(" ".join(self.texts) or "The remote agent's task ended without an answer.")


def _whole(args: dict[str, Any]) -> dict[str, Any]:
    """Arguments as sent: A2A data parts carry every number as a float (120 -> 120.0)."""
    return {k: int(v) if isinstance(v, float) and v.is_integer() else v for k, v in args.items()}


def mcp_agent_tool(
    url: str, tool: str, name: str, description: str, token: str | None = None
) -> FunctionTool:
    """A tool asking the remote compiler served as MCP tool `tool` at `url` (``/mcp``)."""

    async def ask(question: str, ctx: Context) -> str:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        from llm_compiler import _upstream

        async with _upstream.mcp_http_client()(headers=_headers(token) or None) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool(tool, {"question": question})
                while _held(result) is not None:
                    held = _held(result) or {}
                    for call in held.get("approvals", []):
                        fields = {k: call[k] for k in ("approval_id", "tool", "args")}
                        ctx.write_event_to_stream(
                            RemoteApprovalRequest(protocol="mcp", agent=url, **fields)
                        )
                    arguments = {"run_id": held["run_id"], "after": held["after"]}
                    result = await client.call_tool("await_run", arguments)
                text = "".join(getattr(b, "text", "") for b in result.content)
                if result.is_error:
                    raise ToolError(text or "The remote agent failed.")
                return text

    return FunctionTool.from_defaults(async_fn=ask, name=name, description=description)


def _held(result: Any) -> dict[str, Any] | None:
    """The held run a remote compiler's MCP result names, if it names one."""
    content = result.structured_content
    if isinstance(content, dict) and content.get("status") == "held":
        return content
    return None


async def answer_remote(
    request: RemoteApprovalRequest,
    action: Literal["approve", "edit", "reject"] = "approve",
    args: Mapping[str, Any] | None = None,
    reason: str = "",
    token: str | None = None,
) -> None:
    """Send a verdict on `request`'s held call to the remote server it came from."""
    verdict: dict[str, Any] = {"approval_id": request.approval_id, "action": action}
    verdict["reason"] = reason
    if args is not None:
        verdict["args"] = dict(args)
    if request.protocol == "a2a":
        await _answer_a2a(request, verdict, token)
    else:
        await _answer_mcp(request, verdict, token)


async def _answer_a2a(
    request: RemoteApprovalRequest, verdict: dict[str, Any], token: str | None
) -> None:
    from a2a.client import A2ACardResolver
    from a2a.client.client import ClientConfig
    from a2a.client.client_factory import ClientFactory

    async with httpx.AsyncClient(timeout=None, headers=_headers(token)) as http:
        card = await A2ACardResolver(http, request.agent).get_agent_card()
        config = ClientConfig(streaming=False, httpx_client=http)
        client = ClientFactory(config).create(card)
        try:
            message = _message("", task_id=request.remote_task, data=verdict)
            async for _ in client.send_message(message):
                break  # accepted: the task is working again (or refused, held still)
        finally:
            await client.close()


async def _answer_mcp(
    request: RemoteApprovalRequest, verdict: dict[str, Any], token: str | None
) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    from llm_compiler import _upstream

    async with _upstream.mcp_http_client()(headers=_headers(token) or None) as http:
        async with Client(streamable_http_client(request.agent, http_client=http)) as client:
            result = await client.call_tool("answer_approval", verdict)
            if result.is_error:
                raise ToolError("".join(getattr(b, "text", "") for b in result.content))
