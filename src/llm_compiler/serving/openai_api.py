"""OpenAI-compatible endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` and
``POST /v1/responses``, streaming or not.

The ``model`` names the served workflow; the last user message (or the ``input`` text) is
the question, the messages before it the run's history. A request starts an ordinary run
of the workflow server (``x-handler-id`` names it) and answers with the run's answer as
the assistant's text. The compiler's own tool calls are never sent as ``tool_calls`` or
``function_call`` items, which a client would try to execute: the plan, each task's
outcome and the joiner's thinking come as reasoning (``reasoning_content`` deltas of chat
chunks; a ``reasoning`` output item of a response).

A run that can go no further without verdicts on held tasks ends the response with a
message naming each held call and its approval id (also listed under ``approvals`` in the
``llm_compiler`` member of a chat completion, and in ``metadata.approval_ids`` of a
response). A request whose ``approvals``
(``[{"approval_id": ..., "action": "approve" | "edit" | "reject", "args": {...},
"reason": ...}]``;
with the ``openai`` client, ``extra_body``) answers them continues that run and streams
the rest; verdicts are checked as ``POST /events`` checks them (409, 422).

A run that fails is answered 422 (not 5xx: the ``openai`` client retries those, and a
retry would start the run, and its tools, again); streamed, it is an ``error`` chunk or a
``response.failed`` event. A response that ends on held calls has the status ``incomplete``
and an ``mcp_approval_request`` output item per held call (its id the approval id).
Closing a stream cancels the run unless it waits for approvals.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from llama_index.core.llms import ChatMessage, MessageRole
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from workflows.events import Event

from llm_compiler.events import TaskApprovalRequest, TaskApprovalResponse
from llm_compiler.serving.guard import BadRequest, BodyRoute, Checked, field_errors, parsed
from llm_compiler.serving.runs import (
    Awaiting,
    Ended,
    RunRef,
    ServedRuns,
    approval,
    progress_text,
)
from llm_compiler.serving.verdicts import verdict_for

#: The ``server_label`` of a held call's ``mcp_approval_request`` output item.
SERVER_LABEL = "llm-compiler"
OPENAI_PATH = re.compile(r"^/v1/(?P<api>chat/completions|responses)/?$")
_ROLES = {
    "user": MessageRole.USER,
    "assistant": MessageRole.ASSISTANT,
    "system": MessageRole.SYSTEM,
    "developer": MessageRole.SYSTEM,
}


class Approval(BaseModel):
    """A verdict on a held task, named by its approval id."""

    approval_id: str = Field(min_length=1)
    action: Literal["approve", "edit", "reject"] = "approve"
    args: dict[str, Any] | None = None
    reason: str = ""


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")  # sampling options and the like: not ours

    model: str = Field(min_length=1)
    stream: bool = False
    approvals: list[Approval] = Field(default_factory=list)


class ChatRequest(_Request):
    """The fields of a chat completions request that a compiler run reads."""

    messages: list[dict[str, Any]] = Field(min_length=1)


class ResponsesRequest(_Request):
    """The fields of a Responses request that a compiler run reads."""

    input: str | list[dict[str, Any]]
    instructions: str | None = None


@dataclass(frozen=True)
class Asked:
    """A checked request: the API, the workflow, and a question or verdicts."""

    api: str
    workflow: str
    stream: bool
    question: str = ""
    history: list[ChatMessage] = field(default_factory=list)
    verdicts: list[TaskApprovalResponse] = field(default_factory=list)


def _text(content: Any) -> str:
    """A message's text (the text parts of a list of parts)."""
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return " ".join(p for p in parts if isinstance(p, str))
    return content if isinstance(content, str) else ""


def conversation(messages: list[dict[str, Any]]) -> tuple[str, list[ChatMessage]]:
    """The last user message's text and the user, assistant and system messages before it."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users:
        return "", []
    last = users[-1]
    history = []
    for message in messages[:last]:
        role, text = _ROLES.get(str(message.get("role"))), _text(message.get("content"))
        if role is not None and text.strip():
            history.append(ChatMessage(role=role, content=text))
    return _text(messages[last].get("content")).strip(), history


def openai_error(e: BadRequest) -> BadRequest:
    """`e` with an OpenAI-style ``error`` object beside its ``detail``."""
    kind = "invalid_request_error" if e.status < 500 else "server_error"
    error = {"message": e.detail, "type": kind, "param": None, "code": str(e.status)}
    return BadRequest(e.status, e.detail, {**e.fields, "error": error})


def openai_body_route(workflows: Mapping[str, Any]) -> BodyRoute:
    """The validator of ``POST /v1/chat/completions`` and ``POST /v1/responses``."""

    async def validate(match: re.Match[str], data: dict[str, Any], body: bytes) -> Checked:
        try:
            return Checked(_asked(match["api"], data, workflows), body)
        except BadRequest as e:
            raise openai_error(e) from None

    return BodyRoute(OPENAI_PATH, validate)


def _asked(api: str, data: dict[str, Any], workflows: Mapping[str, Any]) -> Asked:
    kind = ChatRequest if api == "chat/completions" else ResponsesRequest
    try:
        request = kind.model_validate(data)
    except ValidationError as e:
        raise BadRequest(400, f"Invalid {api} request: {field_errors(e)}.") from None
    if request.model not in workflows:
        served = ", ".join(sorted(workflows))
        raise BadRequest(404, f"No model {request.model!r}: this server serves {served}.")
    verdicts = [verdict_for(a.approval_id, a.model_dump()) for a in request.approvals]
    if isinstance(request, ChatRequest):
        question, history = conversation(request.messages)
    elif isinstance(request.input, str):
        question, history = request.input.strip(), []
    else:
        question, history = conversation(request.input)
    if isinstance(request, ResponsesRequest) and request.instructions:
        history.insert(0, ChatMessage(role=MessageRole.SYSTEM, content=request.instructions))
    if not verdicts and not question:
        raise BadRequest(400, "The last user message must be a non-empty question.")
    return Asked(api, request.model, request.stream, question, history, verdicts)


class ChatWriter:
    """A run as chat completion chunks, or as one chat completion."""

    def __init__(self, model: str, ref: RunRef) -> None:
        self.model, self.ref = model, ref
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.reasoning: list[str] = []
        self.content = ""
        self.extra: dict[str, Any] = {"handler_id": ref.handler_id, "run_id": ref.run_id}
        self.usage: dict[str, int] | None = None
        self.error: str | None = None

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }

    def opening(self) -> list[dict[str, Any]]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def feed(self, item: Event | Ended | Awaiting) -> list[dict[str, Any]]:
        """The chunks `item` adds."""
        if isinstance(item, Awaiting):
            self.extra["approvals"] = [approval(r) for r in item.held]
            return self._close(item.message())
        if isinstance(item, Ended):
            if item.answer is None:
                self.error = item.error
                return [{"error": {"message": item.error, "type": "run_failed", "code": None}}]
            self.usage = _chat_usage(item)
            return self._close(item.answer)
        text = progress_text(item)
        if not text:
            return []
        self.reasoning.append(text)
        return [self._chunk({"reasoning_content": text})]

    def _close(self, text: str) -> list[dict[str, Any]]:
        self.content = text
        last = self._chunk({}, "stop")
        last["llm_compiler"] = self.extra
        if self.usage is not None:
            last["usage"] = self.usage
        return [self._chunk({"content": text}), last]

    def result(self) -> dict[str, Any]:
        """The whole chat completion (after the run's end or wait was fed)."""
        message = {"role": "assistant", "content": self.content, "tool_calls": None}
        message["reasoning_content"] = "".join(self.reasoning)
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            ],
            "usage": self.usage or _chat_usage(None),
            "llm_compiler": self.extra,
        }


def _chat_usage(ended: Ended | None) -> dict[str, int]:
    usage = ended.usage if ended is not None else {}
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


class ResponsesWriter:
    """A run as Responses streaming events (each with its ``sequence_number``), or as one
    response: a ``reasoning`` item with the run's progress, then the answer's ``message``."""

    def __init__(self, model: str, ref: RunRef) -> None:
        self.model, self.ref = model, ref
        self.id = f"resp_{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.seq = 0
        self.output: list[dict[str, Any]] = []
        self.reasoning: dict[str, Any] | None = None
        self.status = "in_progress"
        self.metadata = {"handler_id": ref.handler_id, "run_id": ref.run_id}
        self.usage: dict[str, Any] | None = None
        self.error: str | None = None

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return event

    def response(self) -> dict[str, Any]:
        """The response object as it stands."""
        error = {"code": "server_error", "message": self.error} if self.error else None
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": self.status,
            "model": self.model,
            "output": self.output,
            "parallel_tool_calls": False,
            "tool_choice": "none",
            "tools": [],
            "error": error,
            "incomplete_details": None,
            "metadata": dict(self.metadata),
            "usage": self.usage,
        }

    def opening(self) -> list[dict[str, Any]]:
        created = self._event("response.created", response=self.response())
        return [created, self._event("response.in_progress", response=self.response())]

    def feed(self, item: Event | Ended | Awaiting) -> list[dict[str, Any]]:
        """The events `item` adds."""
        if isinstance(item, Awaiting):
            self.metadata["approval_ids"] = ",".join(r.approval_id for r in item.held)[:512]
            return self._finish(item.message(), item.held)
        if isinstance(item, Ended):
            if item.answer is None:
                self.error = item.error
                events = self._end_reasoning()
                self.status = "failed"
                return [*events, self._event("response.failed", response=self.response())]
            self.usage = _responses_usage(item)
            return self._finish(item.answer)
        text = progress_text(item)
        return self._reason(text) if text else []

    def _reason(self, text: str) -> list[dict[str, Any]]:
        events = []
        if self.reasoning is None:
            self.reasoning = {
                "type": "reasoning",
                "id": f"rs_{uuid.uuid4().hex}",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": ""}],
                "status": "in_progress",
            }
            self.output.append(self.reasoning)
            events += self._added(self.reasoning, {"type": "reasoning_text", "text": ""})
        self.reasoning["content"][0]["text"] += text
        where = self._where(self.reasoning)
        return [*events, self._event("response.reasoning_text.delta", delta=text, **where)]

    def _where(self, item: dict[str, Any]) -> dict[str, Any]:
        return {"item_id": item["id"], "output_index": self.output.index(item), "content_index": 0}

    def _added(self, item: dict[str, Any], part: dict[str, Any]) -> list[dict[str, Any]]:
        where = self._where(item)
        index = where["output_index"]
        return [
            self._event("response.output_item.added", output_index=index, item=_open(item)),
            self._event("response.content_part.added", part=dict(part), **where),
        ]

    def _done(self, item: dict[str, Any], kind: str, **text: Any) -> list[dict[str, Any]]:
        item["status"] = "completed"
        where = self._where(item)
        part = item["content"][0]
        return [
            self._event(kind, **text, **where),
            self._event("response.content_part.done", part=part, **where),
            self._event("response.output_item.done", output_index=where["output_index"], item=item),
        ]

    def _end_reasoning(self) -> list[dict[str, Any]]:
        if self.reasoning is None or self.reasoning["status"] == "completed":
            return []
        text = self.reasoning["content"][0]["text"]
        return self._done(self.reasoning, "response.reasoning_text.done", text=text)

    def _finish(self, text: str, held: Sequence[TaskApprovalRequest] = ()) -> list[dict[str, Any]]:
        """The answer's message and the end; with `held` calls, an ``mcp_approval_request``
        item each and the status ``incomplete`` (the run waits for their verdicts)."""
        events = self._end_reasoning()
        part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        message = {
            "type": "message",
            "id": f"msg_{uuid.uuid4().hex}",
            "role": "assistant",
            "status": "in_progress",
            "content": [part],
        }
        self.output.append(message)
        events += self._added(message, part)
        where = self._where(message)
        events.append(self._event("response.output_text.delta", delta=text, logprobs=[], **where))
        part["text"] = text
        events += self._done(message, "response.output_text.done", text=text, logprobs=[])
        for request in held:
            events += self._held(request)
        self.status = "incomplete" if held else "completed"
        return [*events, self._event(f"response.{self.status}", response=self.response())]

    def _held(self, request: TaskApprovalRequest) -> list[dict[str, Any]]:
        """A held call as the Responses API shows a tool call waiting for approval."""
        call = {
            "type": "mcp_approval_request",
            "id": request.approval_id,
            "name": request.tool_name,
            "arguments": json.dumps(request.args, default=str),
            "server_label": SERVER_LABEL,
        }
        self.output.append(call)
        index = len(self.output) - 1
        return [
            self._event("response.output_item.added", output_index=index, item=call),
            self._event("response.output_item.done", output_index=index, item=call),
        ]

    def result(self) -> dict[str, Any]:
        """The whole response (after the run's end or wait was fed)."""
        return self.response()


def _open(item: dict[str, Any]) -> dict[str, Any]:
    """An output item as it is announced: in progress, its content empty."""
    return {**item, "status": "in_progress", "content": []}


def _responses_usage(ended: Ended) -> dict[str, Any]:
    usage = ended.usage
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


Writer = ChatWriter | ResponsesWriter


def openai_routes(runs: ServedRuns) -> list[Route]:
    """``GET /v1/models`` and the two POST routes (bodies checked by :func:`openai_body_route`)."""

    async def models(request: Request) -> Response:
        created = int(time.time())
        data = [
            {"id": name, "object": "model", "created": created, "owned_by": "llm-compiler"}
            for name in runs.workflows
        ]
        return JSONResponse({"object": "list", "data": data})

    async def endpoint(request: Request) -> Response:
        asked: Asked = parsed(request.scope)
        try:
            if asked.verdicts:
                ref, after = await runs.answer(asked.verdicts)
            else:
                ref, after = await runs.start(asked.workflow, asked.question, asked.history), -1
        except BadRequest as e:
            refused = openai_error(e)
            return JSONResponse(refused.body(), status_code=refused.status)
        make: Callable[[str, RunRef], Writer] = (
            ChatWriter if asked.api == "chat/completions" else ResponsesWriter
        )
        writer = make(asked.workflow, ref)
        headers = {"x-handler-id": ref.handler_id, "cache-control": "no-cache"}
        if asked.stream:
            body = _stream(runs, ref, after, writer, request.is_disconnected)
            return StreamingResponse(body, media_type="text/event-stream", headers=headers)
        async for _ in _events(runs, ref, after, writer):
            pass
        if writer.error is not None:
            failed = openai_error(BadRequest(422, writer.error))
            return JSONResponse(failed.body(), status_code=422, headers=headers)
        return JSONResponse(writer.result(), headers=headers)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", endpoint, methods=["POST"]),
        Route("/v1/responses", endpoint, methods=["POST"]),
    ]


async def _events(
    runs: ServedRuns, ref: RunRef, after: int, writer: Writer
) -> AsyncIterator[dict[str, Any]]:
    for event in writer.opening():
        yield event
    async for _, item in runs.follow(ref.run_id, after):
        for event in writer.feed(item):
            yield event


async def _stream(
    runs: ServedRuns,
    ref: RunRef,
    after: int,
    writer: Writer,
    gone: Callable[[], Any],
) -> AsyncIterator[str]:
    """The SSE lines of the run; the run is cancelled if the client leaves before its end."""
    chat = isinstance(writer, ChatWriter)
    ended = False
    try:
        async for event in _events(runs, ref, after, writer):
            name = "" if chat else f"event: {event['type']}\n"
            yield f"{name}data: {json.dumps(event, default=str)}\n\n"
        ended = True
        if chat:
            yield "data: [DONE]\n\n"
    finally:
        if not ended:
            with anyio.CancelScope(shield=True):  # this task is being cancelled
                if await gone():
                    await runs.cancel(ref)
