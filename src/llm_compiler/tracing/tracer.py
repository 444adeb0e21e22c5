"""The engine's tracing hooks: one :class:`Tracer` per workflow, spans kept per run."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.instrumentation.events.agent import (
    AgentChatWithStepEndEvent,
    AgentChatWithStepStartEvent,
    AgentToolCallEvent,
)
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
from llama_index.core.tools import BaseTool
from llama_index_instrumentation.span import active_span_id

from llm_compiler._upstream import result_task
from llm_compiler.errors import LLMCompilerError
from llm_compiler.tracing import attributes as A
from llm_compiler.tracing.spans import Active, Span, _bound, listening, start_span
from llm_compiler.tracing.usage import LLMCallUsage, Usage

#: The run (by the id ``run()`` gave it) whose tasks are running: set while the workflow
#: starts a run, so every task of the run inherits it.
_CURRENT_RUN: ContextVar[str | None] = ContextVar("llm_compiler_run", default=None)


class TaskFailed(LLMCompilerError):
    """A task's error observation, as the exception its span ends with."""


@dataclass
class _RunSpans:
    run: Span
    rounds: dict[int, Span] = field(default_factory=dict)
    tasks: dict[int, Span] = field(default_factory=dict)


class Tracer:
    """Opens and closes the spans of each run (see :mod:`.spans`); off: does nothing."""

    def __init__(self, agent: str, enabled: bool = True) -> None:
        self.agent, self.enabled = agent, enabled
        self._runs: dict[str, _RunSpans] = {}

    # ------------------------------------------------------------------ run

    @contextmanager
    def start_run(self, run_id: str) -> Iterator[None]:
        """Open the run's span under the caller's, and make it current while the workflow
        starts the run: the run's tasks (its steps) inherit it, so the workflow's spans
        nest in it and a run resumed from a snapshot (whose steps carry the snapshot's run
        id) still finds it."""
        if not self.enabled or run_id in self._runs or not listening():
            yield  # no handler: a run's spans would cost and go nowhere
            return
        attrs = {A.OPERATION: "invoke_agent", A.AGENT_NAME: self.agent, A.RUN_ID: run_id}
        span = start_span(
            f"invoke_agent {self.agent}", active_span_id.get(), attrs, _bound(run_id=run_id)
        )
        self._runs[run_id] = _RunSpans(span)
        token = _CURRENT_RUN.set(run_id)
        try:
            with Active(span):
                yield
        finally:
            _CURRENT_RUN.reset(token)

    def _spans(self, run_id: str) -> _RunSpans | None:
        """The spans of `run_id`, or of the run whose task asks (a resumed run's steps use
        the run id of the snapshot they resumed)."""
        spans = self._runs.get(run_id)
        current = _CURRENT_RUN.get()
        if spans is None and current is not None and current in self._runs:
            spans = self._runs[run_id] = self._runs[current]
        return spans

    def watch(self, handler: Any, run_id: str) -> None:
        """End the run's spans when `handler`'s result is known."""
        result = result_task(handler)
        if run_id in self._runs and result is not None:
            result.add_done_callback(lambda done: self.end_run(run_id, *_outcome(done)))

    def begin(self, run_id: str, question: str, dialect: str) -> None:
        """Record the question the run answers."""
        if (spans := self._spans(run_id)) is None:
            return
        spans.run.set({A.DIALECT: dialect})
        spans.run.event(AgentChatWithStepStartEvent(user_msg=question))

    def end_run(self, run_id: str, result: Any = None, error: BaseException | None = None) -> None:
        """Close whatever the run left open, then the run's span."""
        spans = self._spans(run_id)
        if spans is None:
            return
        summary = getattr(result, "summary", None)
        cancelled = error or asyncio.CancelledError("The run ended first.")
        for task in spans.tasks.values():
            task.set({A.TASK_STATUS: "not_run"})
            task.end(error=cancelled)
        rounds = getattr(summary, "rounds", [])
        for number in list(spans.rounds):
            if number < len(rounds):
                self.end_round(run_id, rounds[number], "finish")
            else:
                spans.rounds.pop(number).end(error=error)
        if summary is not None:
            spans.run.set(_usage_attrs(summary.usage))
            spans.run.set(
                {
                    "llm_compiler.rounds": len(summary.rounds),
                    "llm_compiler.replans": summary.replans,
                }
            )
            spans.run.event(
                AgentChatWithStepEndEvent(response=AgentChatResponse(response=summary.answer))
            )
        for key in [k for k, v in self._runs.items() if v is spans]:
            del self._runs[key]
        spans.run.end(result=None if summary is not None else result, error=error)

    # ------------------------------------------------------------------ rounds

    def _parent(self, run_id: str, round: int | None = None) -> str | None:
        spans = self._spans(run_id)
        if spans is None:
            return active_span_id.get()
        span = spans.rounds.get(round) if round is not None else None
        return (span or spans.run).id

    def start_round(self, run_id: str, round: int) -> None:
        """Open a round's span (once) under the run's."""
        spans = self._spans(run_id)
        if spans is None or round in spans.rounds:
            return
        attrs = {A.RUN_ID: run_id, A.ROUND: round}
        spans.rounds[round] = start_span(
            "llm_compiler.round", spans.run.id, attrs, _bound(run_id=run_id, round=round)
        )

    def end_round(self, run_id: str, summary: Any, decision: str | None) -> None:
        """Close a round's span with its tasks, plan errors, the joiner's verdict, its usage.

        `summary` is the round's :class:`~llm_compiler.engine.summary.RoundSummary`.
        """
        spans = self._spans(run_id)
        span = spans.rounds.pop(summary.round, None) if spans is not None else None
        if span is None:
            return
        span.set(
            {
                A.ROUND_TASKS: summary.task_ids,
                A.ROUND_ERRORS: summary.errors or None,
                A.ROUND_DECISION: decision,
                A.REPLAN_REASON: summary.replan_reason,
                A.ROUND_CACHED_PLAN: getattr(summary, "cached_plan", False) or None,
                **_usage_attrs(summary.usage),
            }
        )
        span.end(result=decision)

    # ------------------------------------------------------------------ LLM calls

    def start_llm(
        self,
        run_id: str,
        round: int,
        phase: str,
        model: str | None,
        messages: list[ChatMessage] | None,
        prompt: str | None,
    ) -> Span | None:
        """Open a planner or joiner span; the LLM client's own spans nest in it."""
        if self._spans(run_id) is None:
            return None
        operation = "chat" if messages is not None else "text_completion"
        attrs = {
            A.OPERATION: operation,
            A.REQUEST_MODEL: model,
            A.PHASE: phase,
            A.ROUND: round,
            A.RUN_ID: run_id,
        }
        bound = _bound(phase=phase, round=round, model=model)
        span = start_span(f"llm_compiler.{phase}", self._parent(run_id, round), attrs, bound)
        model_dict = {"model": model} if model else {}
        if messages is not None:
            span.event(
                LLMChatStartEvent(messages=messages, additional_kwargs={}, model_dict=model_dict)
            )
        else:
            span.event(
                LLMCompletionStartEvent(
                    prompt=prompt or "", additional_kwargs={}, model_dict=model_dict
                )
            )
        return span

    @staticmethod
    def end_llm(
        span: Span | None,
        call: LLMCallUsage,
        reply: str,
        messages: list[ChatMessage] | None,
        prompt: str | None,
    ) -> None:
        """Close an LLM span with its reply and token counts.

        The GenAI usage attributes are always ours. The counts in the end event (which
        OpenInference turns into ``llm.token_count.*``) are only there when we counted
        them: a server's report is already on the LLM client's own span nested in ours,
        and backends that sum LLM spans would count it twice.
        """
        if span is None:
            return
        raw: dict[str, Any] = {}
        if call.source == "counted":
            raw["usage"] = {
                "prompt_tokens": call.prompt_tokens,
                "completion_tokens": call.completion_tokens,
                "total_tokens": call.total_tokens,
            }
        span.set({**_usage_attrs(call), A.USAGE_SOURCE: call.source})
        if messages is not None:
            response = ChatResponse(message=ChatMessage(role="assistant", content=reply), raw=raw)
            span.event(LLMChatEndEvent(messages=messages, response=response))
        else:
            completion = CompletionResponse(text=reply, raw=raw)
            span.event(LLMCompletionEndEvent(prompt=prompt or "", response=completion))
        span.end(result=reply)

    # ------------------------------------------------------------------ tasks

    def start_task(
        self,
        run_id: str,
        task_id: int,
        round: int,
        tool: str,
        deps: list[int],
        args: dict[str, Any],
        instance: BaseTool | None,
    ) -> Span | None:
        """Open a task's span under its round's; the tool's own spans nest in it."""
        spans = self._spans(run_id)
        if spans is None:
            return None
        attrs = {
            A.OPERATION: "execute_tool",
            A.TOOL_NAME: tool,
            A.TOOL_TYPE: "function",
            A.TOOL_CALL_ID: f"{run_id}:{task_id}",
            A.TASK_ID: task_id,
            A.ROUND: round,
            A.TASK_DEPS: deps,
            A.TOOL_ARGUMENTS: args,
            A.RUN_ID: run_id,
        }
        bound = _bound(task_id=task_id, round=round, tool=tool, deps=deps, args=args)
        parent = self._parent(run_id, round)
        span = start_span(f"execute_tool {tool}", parent, attrs, bound, instance)
        spans.tasks[task_id] = span
        if instance is not None:  # handlers that know tools take the span as a tool call
            span.event(AgentToolCallEvent(arguments=A.text(args), tool=instance.metadata))
        return span

    def end_task(
        self,
        run_id: str,
        task_id: int,
        output: Any,
        is_error: bool,
        skipped: bool,
        cached: float | None = None,
    ) -> None:
        """Close a task's span: its output, or its error (status error) or why it was
        skipped; `cached`: the output was served from the result cache, saving that many
        seconds."""
        spans = self._spans(run_id)
        span = spans.tasks.pop(task_id, None) if spans is not None else None
        if span is None:
            return
        if cached is not None:
            span.set({A.TASK_CACHED: True, A.TASK_SAVED: cached})
        if skipped:
            span.set({A.TASK_STATUS: "skipped", A.SKIPPED_REASON: output})
            span.end(result=output)
        elif is_error:
            span.set({A.TASK_STATUS: "error", A.TASK_ERROR: output, A.ERROR_TYPE: "tool_error"})
            span.end(error=TaskFailed(A.text(output)))
        else:
            span.set({A.TASK_STATUS: "done", A.TOOL_RESULT: output})
            span.end(result=A.text(output))

    def not_run(
        self,
        run_id: str,
        task_id: int,
        round: int,
        tool: str,
        deps: list[int],
        args: dict[str, Any],
        message: str,
        skipped: bool,
    ) -> None:
        """A task that never ran (invalid, or skipped): a span of no length saying why."""
        if self.start_task(run_id, task_id, round, tool, deps, args, None) is not None:
            self.end_task(run_id, task_id, message, True, skipped)


def _usage_attrs(usage: Usage) -> dict[str, Any]:
    attrs = A.usage_attributes(
        usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens, usage.cost
    )
    attrs[A.LLM_CALLS] = usage.calls
    return attrs


def _outcome(done: asyncio.Future[Any]) -> tuple[Any, BaseException | None]:
    """(result, error) of a run's finished result task (cancelled: a CancelledError)."""
    if done.cancelled():
        return None, asyncio.CancelledError("The run was cancelled.")
    error = done.exception()
    if error is not None:
        return None, error
    stop = done.result()
    return getattr(stop, "result", stop), None
