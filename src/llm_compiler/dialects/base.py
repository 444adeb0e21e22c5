"""The plan-dialect protocol: how a plan format plugs into the engine.

A dialect owns everything about the text an LLM writes: the planner prompt, its stop
sequences and request extras, a streaming parser that turns the model's text into
:class:`~llm_compiler.plan.PlanTask`s, and the joiner's prompt and decision parser. The
engine (scheduler, executor, events, state) never knows which dialect produced the
tasks; adding a format is a new module here.

The types both sides speak live here too: the :class:`LLMRequest` a dialect asks for,
the :class:`JoinerDecision` it parses, the :class:`PlannerContext` it is given (and
:mod:`.prompting`'s records). The engine imports them; no dialect imports the engine.

Optional: a dialect may also implement :class:`DirectAnswer` to end a round without the
joiner call when the planner's own text already is the answer, and :class:`ForcedJoin`
to give the joiner's decision without a call when the reply could only be one text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from llama_index.core.llms import ChatMessage
from llama_index.core.tools import BaseTool

from llm_compiler.dialects.prompting import PromptContext, RoundRecord
from llm_compiler.plan import PlanTask


@dataclass(frozen=True)
class LLMRequest:
    """One LLM call: messages for a chat model, or one prompt for a completion model.

    Attributes:
        messages: Chat messages (chat models).
        prompt: The whole prompt (completion models).
        stop: Stop sequences; the text is cut before the first one.
        prefill: Text the prompt already ends with that belongs to the reply (``Thought:``).
        extras: Request-body fields for servers that take them (``grammar``,
            ``response_format``); sent to OpenAI-protocol clients as ``extra_body``.
    """

    messages: Sequence[ChatMessage] | None = None
    prompt: str | None = None
    stop: Sequence[str] = ()
    prefill: str = ""
    extras: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JoinerDecision:
    """What the joiner decided.

    Attributes:
        action: ``finish`` (answer the user) or ``replan`` (plan again).
        content: The answer, or the reason to replan (may be empty: a failed join).
        thought: The joiner's ``Thought:``, if any.
    """

    action: Literal["finish", "replan"]
    content: str
    thought: str | None = None


@dataclass(frozen=True)
class PlannerContext:
    """What the planner of one round is given.

    Attributes:
        prompt: The question, conversation, earlier rounds and the user's system prompt.
        tools: The tools of this run, in order.
        round: The round (0 for the first plan).
        next_id: The first free task id (ids are unique across rounds).
        known_ids: Ids of earlier rounds' tasks, which new tasks may reference.
        taken_ids: Every id a new task may not reuse (tasks and join lines).
        max_tasks: Most tasks one plan may have.
        max_plan_chars / max_plan_errors / max_line_chars / max_arg_depth: The parser's
            bounds (see :class:`~llm_compiler.config.CompilerConfig`).
        constrained: Ask the server for constrained decoding (a grammar or a JSON
            schema) if the dialect has one.
        merged: Tools whose call written again in one plan with the same arguments is
            one task, its ``$N`` the first's: those whose repeated call the result cache
            would serve (the engine's ``merges``). Any other repeated line is a task.
    """

    prompt: PromptContext
    tools: Sequence[BaseTool]
    round: int = 0
    next_id: int = 1
    known_ids: frozenset[int] = frozenset()
    taken_ids: frozenset[int] = frozenset()
    max_tasks: int = 100
    constrained: bool = False
    max_plan_chars: int = 200_000
    max_plan_errors: int = 20
    max_line_chars: int = 20_000
    max_arg_depth: int = 20
    merged: frozenset[str] = frozenset()


@runtime_checkable
class PlanStream(Protocol):
    """A streaming plan parser: text in, completed tasks out, never raising.

    Read-only attributes (plain attributes or properties):
    ``done`` (no more tasks will come; the engine stops reading), ``text`` (everything fed
    so far), ``thoughts`` (the planner's thoughts), ``errors`` (plan-level problems: no
    join, too many tasks, reused ids ...) and ``join_id`` (the join marker's id, if any).
    """

    @property
    def done(self) -> bool: ...

    @property
    def text(self) -> str: ...

    @property
    def thoughts(self) -> list[str]: ...

    @property
    def errors(self) -> list[str]: ...

    @property
    def join_id(self) -> int | None: ...

    def feed(self, delta: str) -> list[PlanTask]:
        """Add streamed text; return the tasks it completed."""
        ...

    def finish(self) -> list[PlanTask]:
        """The stream ended: return the last tasks and record plan-level errors."""
        ...


@runtime_checkable
class PlanDialect(Protocol):
    """A plan format: prompts, stops, streaming parser and joiner."""

    # Read-only, so frozen dataclasses (the dialects) satisfy the protocol.
    @property
    def name(self) -> str:
        """A short name (``llmcompiler``, ``coa``, ``json``) shown in summaries."""
        ...

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        """The planner call for one round."""
        ...

    def plan_parser(self, context: PlannerContext) -> PlanStream:
        """A fresh streaming parser for the planner's reply in this round."""
        ...

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        """The joiner call after a round."""
        ...

    def parse_decision(self, text: str) -> JoinerDecision:
        """The joiner's decision from its whole reply (prefill included)."""
        ...


@runtime_checkable
class DirectAnswer(Protocol):
    """Optional dialect hook: answer from the planner's text without a joiner call.

    The join step asks it first (after a ``return_direct`` tool, before the joiner).
    Chain-of-Abstraction uses it: a reasoning that calls no function is the answer.
    """

    def answer_without_join(self, record: RoundRecord) -> str | None:
        """The answer for a finished round, or None to call the joiner as usual."""
        ...


@runtime_checkable
class ForcedJoin(Protocol):
    """Optional dialect hook: the joiner's decision when its reply is forced.

    The join step asks it before calling the joiner. A dialect whose joiner grammar
    leaves nothing to choose (the engine-rendered answer of
    :mod:`~llm_compiler.dialects.selected_answer`) answers here without a model call.
    """

    def forced_decision(self, context: PromptContext) -> JoinerDecision | None:
        """The decision for this joiner call, or None to call the joiner as usual."""
        ...
