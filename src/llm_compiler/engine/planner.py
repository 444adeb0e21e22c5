"""The planner: streams the planner LLM through the dialect's parser, emitting tasks early.

Each task is checked against the run's tools (unknown tool, arguments that do not bind
or do not fit the schema) as soon as its line completes, and published as a
``PlanEvent`` the scheduler acts on at once: a task can start while the planner is still
writing the rest of the plan.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Literal

from llama_index.core.llms import LLM
from workflows import Context
from workflows.events import Event

from llm_compiler.config import CompilerConfig
from llm_compiler.dialects.base import PlanDialect, PlannerContext
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.engine.cache import serves
from llm_compiler.engine.llm import Metered, metered_call
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import CompilerStream, PlanEvent
from llm_compiler.plan import PlanError, PlanTask, error_kind
from llm_compiler.tools import ToolSet, bind, validate_arguments
from llm_compiler.tracing import ModelPrice, Tracer, price_table

logger = logging.getLogger(__name__)


def publish(ctx: Context[Any], ev: Event) -> None:
    """Show `ev` on the run's stream and route it to the steps that take it."""
    ctx.write_event_to_stream(ev)
    ctx.send_event(ev)


class TokenStream:
    """Collects an LLM call's deltas and publishes them as ``CompilerStream`` events."""

    def __init__(
        self, ctx: Context[Any], name: str, phase: Literal["plan", "join"], round: int, on: bool
    ) -> None:
        self.ctx, self.name, self.phase, self.round, self.on = ctx, name, phase, round, on
        self.pending: list[str] = []
        self.text = ""

    def add(self, delta: str) -> None:
        """Record a delta (published at the next flush)."""
        if not delta:
            return
        self.text += delta
        if self.on:
            self.pending.append(delta)

    def take(self, delta: str) -> bool:
        """``add`` as a stream callback that never stops the stream."""
        self.add(delta)
        return False

    def flush(self) -> None:
        """Publish what arrived since the last flush as one event."""
        if not self.pending:
            return
        delta = "".join(self.pending)
        self.pending.clear()
        self.ctx.write_event_to_stream(
            CompilerStream(
                delta=delta,
                response=self.text,
                current_agent_name=self.name,
                raw={"phase": self.phase, "round": self.round},
                phase=self.phase,
                round=self.round,
            )
        )


def check_task(task: PlanTask, tools: ToolSet) -> PlanTask:
    """Reject unknown tools; bind arguments to parameters; validate literal arguments.

    A task whose arguments hold no reference is validated against the tool's schema
    now, so a bad call is an error observation without being dispatched. Never raises:
    whatever goes wrong with one line is that task's error.
    """
    try:
        return _check_task(task, tools)
    except Exception as e:  # noqa: BLE001 - one bad line is one error observation
        message = f"Task {task.id} could not be checked: {type(e).__name__}: {str(e)[:200]}"
        return task.failed(PlanError(message, "other"))


def _check_task(task: PlanTask, tools: ToolSet) -> PlanTask:
    if task.error is not None:
        return task
    tool = tools.get(task.tool)
    if tool is None:
        available = ", ".join(sorted(tools.names))
        message = f"Unknown tool {task.tool!r}. Available: {available}."
        return task.failed(PlanError(message, "unknown_tool"))
    bound = bind(task, tool)
    if bound.error is None and not bound.deps:
        try:
            validate_arguments(tool, bound.kwargs)
        except ValueError as e:
            return bound.failed(PlanError(str(e), "bad_arguments"))
    return bound


class Planner:
    """Plans one round: builds the request, streams the reply, publishes tasks."""

    def __init__(
        self,
        llm: LLM,
        dialect: PlanDialect,
        config: CompilerConfig,
        name: str,
        tracer: Tracer | None = None,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.llm, self.dialect, self.config, self.name = llm, dialect, config, name
        self.tracer = tracer or Tracer(name, enabled=False)
        self.prices = price_table(config.prices) if prices is None else prices
        self._warming: set[asyncio.Task[None]] = set()

    def warm(self, state: CompilerState, tools: ToolSet | None, prompt: PromptContext) -> None:
        """Have the embedded model read the planner's static prompt again, in the background.

        llama.cpp's server keeps only the previous prompt's evaluated prefix, and the
        joiner's prompt evicts the planner's: after an answer, a one-token request with
        the planner's instructions, tools and examples (the dialect's ``warm_request``)
        leaves them evaluated for the next question. Only for a grammar server's client
        that does not keep prompts itself (the embedded model's does); errors are
        ignored (it is an optimization).
        """
        make = getattr(self.dialect, "warm_request", None)
        if (
            make is None
            or tools is None
            or not getattr(self.llm, "llm_compiler_constrained", False)
            or getattr(self.llm, "llm_compiler_keeps_prompts", False)
        ):
            return
        request = make(self.context(state, tools, prompt, constrained=True))
        if request is None or request.prompt is None:
            return
        task = asyncio.get_running_loop().create_task(self._warm(request.prompt))
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    async def warmed(self) -> None:
        """Wait for the warm-up requests sent so far."""
        await asyncio.gather(*self._warming)

    async def _warm(self, prompt: str) -> None:
        try:
            # In the body: an OpenAI client's own max_tokens overrides the keyword.
            await self.llm.acomplete(
                prompt, formatted=True, max_tokens=1, extra_body={"max_tokens": 1}
            )
        except Exception as e:  # noqa: BLE001 - a failed warm-up only costs the next question time
            logger.debug("Warming the planner prompt failed: %s", e)

    def context(
        self, state: CompilerState, tools: ToolSet, prompt: PromptContext, constrained: bool
    ) -> PlannerContext:
        """The dialect's view of this round, planned with `tools`."""
        return PlannerContext(
            prompt=prompt,
            tools=list(tools),
            round=state.round,
            # Earlier rounds only: a round planned again after a crash numbers its tasks
            # as the first time, so the ones it already admitted keep their ids.
            next_id=state.next_id(state.round),
            known_ids=frozenset(i for i, t in state.tasks.items() if t.round < state.round),
            taken_ids=frozenset(state.taken_ids(state.round)),
            max_tasks=self.config.max_tasks,
            constrained=constrained,
            max_plan_chars=self.config.max_plan_chars,
            max_plan_errors=self.config.max_plan_errors,
            max_line_chars=self.config.max_line_chars,
            max_arg_depth=self.config.max_arg_depth,
            merged=self.merged(tools),
        )

    def merged(self, tools: ToolSet) -> frozenset[str]:
        """The tools whose repeated call in one plan is one task: those whose repeated
        call the result cache serves (:func:`~llm_compiler.engine.cache.serves`)."""
        rules = RunPolicies.build(tools, self.config.tool_policies)
        enabled = self.config.cache_results
        return frozenset(n for n in tools.names if serves(rules.of(n), enabled))

    async def plan(
        self, ctx: Context[Any], state: CompilerState, tools: ToolSet, context: PlannerContext
    ) -> PlanEvent:
        """Stream the plan; return the round's complete ``PlanEvent`` (not yet published).

        In ``run`` mode each completed task goes to the scheduler at once; in the other
        modes tasks are only shown on the stream.
        """
        round, run_id = context.round, state.run_id
        route = state.mode == "run"
        parser = self.dialect.plan_parser(context)
        tokens = TokenStream(ctx, self.name, "plan", round, self.config.stream_tokens)
        pending: list[PlanTask] = []
        checked: list[PlanTask] = []

        read = 0
        cut = False

        def on_delta(delta: str) -> bool:
            # Every dialect's plan is bounded here too, whatever its parser bounds itself.
            nonlocal read, cut
            room = context.max_plan_chars - read
            if len(delta) > room:
                delta, cut = delta[: max(room, 0)], True
            read += len(delta)
            tokens.add(delta)
            pending.extend(parser.feed(delta))
            return parser.done or cut

        def flush() -> None:
            tokens.flush()
            if pending:
                batch = [check_task(t, tools) for t in pending]
                pending.clear()
                checked.extend(batch)
                ev = PlanEvent(round=round, tasks=batch, run_id=run_id)
                if route:
                    publish(ctx, ev)
                else:
                    ctx.write_event_to_stream(ev)

        meter = Metered(self.tracer, run_id, self.prices)
        _, call = await metered_call(
            self.llm,
            self.dialect.planner_request(context),
            meter,
            phase="planner",
            round=round,
            on_delta=on_delta,
            flush=flush,
        )
        pending.extend(parser.finish())
        flush()
        errors = list(parser.errors)
        if cut and not any(error_kind(e) == "too_large" for e in errors):
            message = (
                f"The plan is longer than {context.max_plan_chars} characters; "
                "the rest was not read."
            )
            errors.append(PlanError(message, "too_large"))
        if not any(not t.is_join for t in checked):
            log_empty_plan(self.name, round, parser.text, errors)
        return PlanEvent(
            round=round,
            run_id=run_id,
            tasks=checked,
            complete=True,
            thoughts=parser.thoughts,
            text=parser.text,
            errors=errors,
            join_id=parser.join_id,
            llm_call=call,
        )


def log_empty_plan(name: str, round: int, text: str, errors: list[str]) -> None:
    """Say that a round planned nothing: a run whose plans never match the format
    otherwise ends with an answer from no tool at all."""
    first = text.strip().splitlines()[0][:120] if text.strip() else ""
    logger.warning(
        "%s: the plan of round %d has no tasks (%s). It began %r; a task line reads "
        "`1. tool(arguments)`.",
        name,
        round,
        "; ".join(errors) or "the planner wrote only join()",
        first,
    )


def parse_plan_text(
    dialect: PlanDialect, context: PlannerContext, text: str, tools: ToolSet
) -> PlanEvent:
    """A whole plan text (a human's edit), parsed and checked like the planner's output."""
    parser = dialect.plan_parser(context)
    tasks = parser.feed(text) + parser.finish()
    return PlanEvent(
        round=context.round,
        tasks=[check_task(t, tools) for t in tasks],
        complete=True,
        thoughts=parser.thoughts,
        text=parser.text,
        errors=parser.errors,
        join_id=parser.join_id,
    )
