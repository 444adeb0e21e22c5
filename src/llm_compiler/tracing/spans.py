"""LLMCompiler spans, sent through llama-index's instrumentation dispatcher.

Any span handler on the root dispatcher sees them: OpenInference's
``LlamaIndexInstrumentor`` (Phoenix, Langfuse, any OTLP backend),
``llama-index-observability-otel``, or a handler of your own. The tree of one run::

    invoke_agent <name>          one per run (the workflow's own spans nest under it)
      llm_compiler.round         one per round: its plan, its tasks and its join
        llm_compiler.planner     the planner call (an LLM span; the client's span nests)
        execute_tool <tool>      one per task, open exactly while the tool ran
        llm_compiler.joiner      the joiner call

Workflow steps run as separate asyncio tasks, and a round's spans open in one step and
close in another, so every span names its parent explicitly rather than through the
``active_span_id`` context variable; each enters and exits in a copy of the caller's
context, so no handler's context changes leak into the steps. A span handler that makes
OpenTelemetry spans (OpenInference does) also gets the GenAI attributes of
:mod:`.attributes`, set on the OpenTelemetry span it made; every handler gets them as the
span's ``tags``, and the standard llama-index events (agent, LLM chat or completion, tool
call) carry inputs, outputs and token counts.
"""

from __future__ import annotations

import contextvars
import inspect
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from llama_index.core.instrumentation.events import BaseEvent
from llama_index_instrumentation import get_dispatcher
from llama_index_instrumentation.dispatcher import active_instrument_tags
from llama_index_instrumentation.event_handlers import NullEventHandler
from llama_index_instrumentation.span import active_span_id
from llama_index_instrumentation.span_handlers import NullSpanHandler

from llm_compiler.tracing import attributes as A

try:  # opentelemetry-api comes with the tracing and serve extras, not the core
    from opentelemetry import trace as otel_trace
except ImportError:  # pragma: no cover - exercised only without the extras
    otel_trace = None  # type: ignore[assignment]

DISPATCHER = get_dispatcher("llm_compiler")


def listening(dispatcher: Any = DISPATCHER) -> bool:
    """Whether any span or event handler besides llama-index's null ones would see the
    spans and events of `dispatcher` (by default, ours)."""
    d: Any = dispatcher
    while d is not None:
        if any(not isinstance(h, NullSpanHandler) for h in d.span_handlers) or any(
            not isinstance(h, NullEventHandler) for h in d.event_handlers
        ):
            return True
        d = d.parent if d.propagate else None
    return False


class StepSpans:
    """A workflow's dispatcher that puts a step run in a span only while a handler
    listens (:func:`listening`, asked at each step run); everything else is the
    dispatcher's own. With none listening, a span would cost a signature binding, an id
    and a walk over null handlers per step run, and go nowhere."""

    def __init__(self, dispatcher: Any) -> None:
        self.dispatcher = dispatcher

    def span(self, func: Any) -> Any:
        """`func` in the dispatcher's span if anyone listens, else `func` itself."""
        return self.dispatcher.span(func) if listening(self.dispatcher) else func

    def __getattr__(self, name: str) -> Any:
        if name == "dispatcher":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.dispatcher, name)


@lru_cache(maxsize=32)
def _signature(names: tuple[str, ...]) -> inspect.Signature:
    kind = inspect.Parameter.KEYWORD_ONLY
    return inspect.Signature([inspect.Parameter(n, kind) for n in names])


def _bound(**values: Any) -> inspect.BoundArguments:
    """Bound arguments for a span's input (what handlers record as its input)."""
    return _signature(tuple(values)).bind(**values)


@dataclass
class Span:
    """An open span: its dispatcher id and, where a handler made one, its OTel span."""

    id: str
    bound: inspect.BoundArguments
    instance: Any = None
    otel: Any = None
    closed: bool = False

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Set attributes on the OpenTelemetry span, if a handler made one."""
        if self.otel is not None and not self.closed:
            self.otel.set_attributes(A.clean(attributes))

    def event(self, event: BaseEvent) -> None:
        """Send a llama-index event that belongs to this span."""
        event.span_id = self.id
        DISPATCHER.event(event)

    def end(self, result: Any = None, error: BaseException | None = None) -> None:
        """Exit the span (dropped, with its error, if `error`); a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        contextvars.copy_context().run(self._end, result, error)

    def _end(self, result: Any, error: BaseException | None) -> None:
        if error is not None:
            DISPATCHER.span_drop(
                id_=self.id, bound_args=self.bound, instance=self.instance, err=error
            )
        else:
            DISPATCHER.span_exit(
                id_=self.id, bound_args=self.bound, instance=self.instance, result=result
            )


def start_span(
    name: str,
    parent: str | None,
    attributes: Mapping[str, Any],
    bound: inspect.BoundArguments,
    instance: Any = None,
) -> Span:
    """Enter a span named `name` under the span `parent` (None: a new trace's root)."""
    span = Span(id=f"{name.replace('-', '_')}-{uuid.uuid4()}", bound=bound, instance=instance)
    span.otel = contextvars.copy_context().run(_enter, span, parent, dict(attributes))
    span.set(attributes)
    return span


def _enter(span: Span, parent: str | None, attributes: dict[str, Any]) -> Any:
    """Enter `span` (in a context copy); return the OTel span a handler made, if any."""
    before = otel_trace.get_current_span() if otel_trace is not None else None
    tags = {**active_instrument_tags.get(), **A.clean(attributes)}
    DISPATCHER.span_enter(
        id_=span.id, bound_args=span.bound, instance=span.instance, parent_id=parent, tags=tags
    )
    if otel_trace is None:
        return None
    after = otel_trace.get_current_span()
    return after if after is not before and after.is_recording() else None


@dataclass
class Active:
    """Makes a span the parent of llama-index spans opened inside (the LLM's, the tool's)."""

    span: Span | None
    _token: Any = field(default=None, init=False)

    def __enter__(self) -> Active:
        if self.span is not None:
            self._token = active_span_id.set(self.span.id)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            active_span_id.reset(self._token)
            self._token = None
