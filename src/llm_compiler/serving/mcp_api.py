"""MCP: each served workflow as one tool of an MCP server at ``/mcp`` (streamable HTTP).

Built on the official ``mcp`` SDK (``MCPServer``), mounted in the same app as the native
API, under the same token, origin and body rules. A workflow's tool takes ``question`` and
answers with the run's answer; the run is an ordinary run of the workflow server. While
it runs, each task's outcome, each held call and each replan is an MCP progress
notification; cancelling the call (or dropping the connection) cancels the run.

A run that can go no further without verdicts on held tasks asks the client, if it can:
on a 2026-07-28 connection with elicitation, the call returns an ``input_required``
result with one elicitation form per held call (its key is the approval id) and the
client's retry carries the verdicts; on an older connection with elicitation, each is
asked with an ``elicitation/create`` request during the call. Verdicts are checked as
``POST /events`` checks them; one that does not fit is asked again with the reason. A
client without elicitation gets a result naming each held call and its approval id (in
words and as structured content), and answers with the ``answer_approval`` tool, which
returns what the run does next (or answers elsewhere and waits with ``await_run``).
"""

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
)
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field, ValidationError
from starlette.routing import BaseRoute
from workflows import Workflow
from workflows.events import Event

from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.events import CompilerStream, TaskApprovalRequest, TaskApprovalResponse
from llm_compiler.serving.guard import BadRequest
from llm_compiler.serving.runs import (
    Awaiting,
    Ended,
    RunRef,
    ServedRuns,
    approval,
    held_call,
    progress_text,
)
from llm_compiler.serving.verdicts import verdict_for

MCP_PATH = "/mcp"
#: The protocol version from which a call asks for input by returning ``input_required``.
INPUT_REQUIRED_VERSION = "2026-07-28"
ANSWER_TOOL = "answer_approval"
AWAIT_TOOL = "await_run"
Reply = str | InputRequiredResult | CallToolResult


class VerdictForm(BaseModel):
    """The elicitation form of a verdict on one held call."""

    action: Literal["approve", "edit", "reject"] = Field(
        "approve", description="approve the call, edit its arguments, or reject it"
    )
    args: str = Field(
        "", description="with edit: a JSON object of the arguments that replace the planned ones"
    )
    reason: str = Field("", description="with reject: why")


def build_mcp(runs: ServedRuns, max_body: int) -> tuple[MCPServer, list[BaseRoute]]:
    """The MCP server (one tool per workflow, and ``answer_approval``) and its routes."""
    server = MCPServer(
        name="llm-compiler",
        instructions="Each tool asks an LLMCompiler agent a question and returns its answer.",
    )
    for name, workflow in runs.workflows.items():
        tool = _workflow_tool(runs, name)
        server.add_tool(
            tool, name=name, description=describe(name, workflow), structured_output=False
        )
    server.add_tool(
        _answer_tool(runs),
        name=ANSWER_TOOL,
        description=(
            "Answer a held tool call of a run (approval_id from the run's result): approve, "
            "edit (args: the arguments that replace the planned ones) or reject (reason). "
            "Returns what the run does next: its answer, or the calls still held."
        ),
        structured_output=False,
    )
    server.add_tool(
        _await_tool(runs),
        name=AWAIT_TOOL,
        description=(
            "Wait for a held run (run_id and after from its result) to go on once its held "
            "calls are answered elsewhere; returns its answer, or the calls held next."
        ),
        structured_output=False,
    )
    # The app's own guards check hosts and origins, so the SDK's DNS-rebinding check (with
    # its fixed list of local names) stays off; the body limit is the app's.
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=max_body,
    )
    return server, list(app.routes)


def describe(name: str, workflow: Workflow) -> str:
    """A workflow tool's description: what it does, and the tools its plans may call."""
    text = (
        f"Ask the {name} agent a question; it plans tool calls, runs them in parallel and answers."
    )
    if isinstance(workflow, LLMCompilerWorkflow) and workflow.tools:
        text += f" Its tools: {', '.join(sorted(workflow.tools))}."
    return text


def _workflow_tool(runs: ServedRuns, name: str) -> Callable[..., Any]:
    async def ask(question: str, ctx: Context) -> Reply:
        """Ask the agent; returns its answer."""
        if ctx.request_state:  # a retry carrying verdicts for the held calls we asked about
            return await _answered(runs, ctx, ctx.request_state)
        if not question.strip():
            raise ToolError("Ask a non-empty question.")
        try:
            ref = await runs.start(name, question.strip())
        except BadRequest as e:
            raise ToolError(e.detail) from None
        return await _drive(runs, ctx, ref, -1)

    return ask


def _answer_tool(runs: ServedRuns) -> Callable[..., Any]:
    async def answer_approval(
        approval_id: str,
        ctx: Context,
        action: Literal["approve", "edit", "reject"] = "approve",
        args: dict[str, Any] | None = None,
        reason: str = "",
    ) -> Reply:
        """Answer a held call; returns what the run does next."""
        try:
            payload = {"action": action, "args": args, "reason": reason}
            ref, after = await runs.answer([verdict_for(approval_id, payload)])
        except BadRequest as e:
            raise ToolError(e.detail) from None
        return await _drive(runs, ctx, ref, after)

    return answer_approval


def _await_tool(runs: ServedRuns) -> Callable[..., Any]:
    async def await_run(run_id: str, after: int, ctx: Context) -> Reply:
        """Wait for the run to go on after `after`; returns what it does next."""
        try:
            ref, _ = await runs.find(run_id)
        except BadRequest as e:
            raise ToolError(e.detail) from None
        return await _drive(runs, ctx, ref, after, owned=False)

    return await_run


async def _drive(
    runs: ServedRuns, ctx: Context, ref: RunRef, after: int, owned: bool = True
) -> Reply:
    """Follow the run to its answer, asking the client for verdicts while it can; an
    `owned` run is cancelled if the call is (or fails) before the run ends or waits."""
    settled = False
    try:
        reply = await _until_settled(runs, ctx, ref, after)
        settled = True
        return reply
    finally:
        if not settled and owned:
            with anyio.CancelScope(shield=True):
                await runs.cancel(ref)


async def _until_settled(runs: ServedRuns, ctx: Context, ref: RunRef, after: int) -> Reply:
    note = ""
    while True:
        outcome = await _follow(runs, ctx, ref, after)
        if isinstance(outcome, Ended):
            return _ended(outcome)
        if _modern(ctx) and _can_elicit(ctx):
            return _input_required(ref, outcome.held, note)
        if not _can_elicit(ctx):
            return _held_result(ref, outcome)
        verdicts = [await _elicit(ctx, request, note) for request in outcome.held]
        try:
            ref, after = await runs.answer(verdicts)
            note = ""
        except BadRequest as e:  # not fitting: asked again, saying why
            note, after = f"{e.detail}\n", await _before_wait(runs, ref)


async def _follow(runs: ServedRuns, ctx: Context, ref: RunRef, after: int) -> Ended | Awaiting:
    """Follow the run from `after`, reporting its milestones as progress notifications."""
    count = 0
    async for _, item in runs.follow(ref.run_id, after):
        if isinstance(item, Ended | Awaiting):
            return item
        text = milestone(item)
        if text:
            count += 1
            await ctx.report_progress(count, None, text)
    return Ended(error="The run's event stream ended without its end.")


def milestone(ev: Event) -> str:
    """A progress notification's message for `ev` (a task's outcome, a held call, a
    replan; not the model's tokens)."""
    return "" if isinstance(ev, CompilerStream) else progress_text(ev).strip()


async def _before_wait(runs: ServedRuns, ref: RunRef) -> int:
    """The sequence just before the run's latest wait (to follow it to that wait again)."""
    events = await runs.store.query_events(ref.run_id)
    waits = [e.sequence for e in events if e.event.type == "AwaitingApproval"]
    return waits[-1] - 1 if waits else -1


def _modern(ctx: Context) -> bool:
    version = ctx.protocol_version
    return version is not None and is_version_at_least(version, INPUT_REQUIRED_VERSION)


def _can_elicit(ctx: Context) -> bool:
    capabilities = ctx.client_capabilities
    elicitation = capabilities.elicitation if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)


def _question(request: TaskApprovalRequest, note: str) -> str:
    return f"{note}Approve {held_call(request)}? (approval id {request.approval_id})"


def _input_required(ref: RunRef, held: Sequence[TaskApprovalRequest], note: str) -> Reply:
    """An ``input_required`` result asking for a verdict on each held call."""
    from mcp.server.elicitation import render_elicitation_schema

    schema = render_elicitation_schema(VerdictForm)
    requests: dict[str, Any] = {
        r.approval_id: ElicitRequest(
            params=ElicitRequestFormParams(message=_question(r, note), requested_schema=schema)
        )
        for r in held
    }
    return InputRequiredResult(input_requests=requests, request_state=ref.run_id)


async def _answered(runs: ServedRuns, ctx: Context, run_id: str) -> Reply:
    """A retry's verdicts sent to run `run_id`, and the run followed on."""
    responses = ctx.input_responses or {}
    ref, _ = await runs.find(run_id)
    try:
        verdicts = [_verdict(key, r) for key, r in responses.items() if isinstance(r, ElicitResult)]
        if not verdicts:
            raise BadRequest(400, "The retry carries no verdicts.")
        ref, after = await runs.answer(verdicts)
    except BadRequest as e:  # asked again, saying why
        outcome = await _follow(runs, ctx, ref, await _before_wait(runs, ref))
        if isinstance(outcome, Awaiting):
            return _input_required(ref, outcome.held, f"{e.detail}\n")
        return _ended(outcome)
    return await _drive(runs, ctx, ref, after)


def _ended(outcome: Ended) -> str:
    """The answer of a run that ended (a ToolError if it failed)."""
    if outcome.answer is None:
        raise ToolError(outcome.error or "The run ended without an answer.")
    return outcome.answer


def _verdict(approval_id: str, result: ElicitResult) -> TaskApprovalResponse:
    """The verdict an elicitation result gives (declined or dismissed: rejected)."""
    if result.action != "accept":
        return verdict_for(approval_id, {"action": "reject", "reason": f"{result.action}d"})
    return verdict_for(approval_id, _form(result.content or {}))


def _form(content: Any) -> dict[str, Any]:
    """A verdict's fields from a filled-in :class:`VerdictForm`, or BadRequest 422."""
    try:
        form = VerdictForm.model_validate(content)
        args = json.loads(form.args) if form.action == "edit" and form.args.strip() else None
    except (ValidationError, ValueError) as e:
        raise BadRequest(422, f"The form does not hold a verdict: {e}") from None
    if args is not None and not isinstance(args, dict):
        raise BadRequest(422, "args must be a JSON object of argument names and values.")
    return {"action": form.action, "args": args, "reason": form.reason}


async def _elicit(ctx: Context, request: TaskApprovalRequest, note: str) -> TaskApprovalResponse:
    """Ask for a verdict with an ``elicitation/create`` request (older connections)."""
    result = await ctx.elicit(_question(request, note), VerdictForm)
    if result.action != "accept":
        return verdict_for(request.approval_id, {"action": "reject", "reason": result.action})
    return verdict_for(request.approval_id, _form(result.data.model_dump()))


def _held_result(ref: RunRef, outcome: Awaiting) -> CallToolResult:
    """The result of a run left waiting for verdicts: in words, and as structured content
    (``status`` held, ``run_id``, ``after`` for ``await_run``, the ``approvals``)."""
    text = (
        f"The run has not finished. {outcome.message()}\nUse the {ANSWER_TOOL} tool with the "
        "approval id and the action; it returns the run's answer, or the calls still held."
    )
    held = {
        "status": "held",
        "run_id": ref.run_id,
        "after": outcome.sequence,
        "approvals": [approval(r) for r in outcome.held],
    }
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=held)
