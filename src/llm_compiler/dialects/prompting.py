"""What every prompt is built from: earlier rounds, the conversation, chat vs completion.

Dialects (:mod:`llm_compiler.dialects`) and the joiner render their own text; this module
holds the records they render, the facts of a task's outcome (:func:`found_nothing`,
:func:`declared_not_found`, :func:`rejected`), and the two shapes a request takes:
messages for chat models, one prompt that ends where the model continues for
completion models.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.llms import ChatMessage, MessageRole

from llm_compiler.tools.results import REJECTED_CALL, NotFound


@dataclass(frozen=True)
class TaskRecord:
    """One task of a finished round, as prompts show it."""

    id: int
    tool: str
    text: str
    """The line as planned (``N. tool(args)``)."""
    observation: str | None = None
    """Its result as text (cut to the observation limit); None if it has none."""
    is_error: bool = False
    skipped: bool = False


#: Results that hold nothing (a tool's empty answer).
_EMPTY = frozenset({"", "None", "null", "[]", "{}", "''", '""', "()"})
_NOT_FOUND_ERROR = f"Error: {NotFound.__name__}"
_REJECTED = f"Error: {REJECTED_CALL}"


def found_nothing(task: TaskRecord) -> bool:
    """Whether a task raised (a timeout, a declared ``NotFound``, a rejection), was
    skipped, or returned nothing (``None``, ``""``, ``[]``, ``{}``)."""
    if task.is_error or task.skipped:
        return True
    return task.observation is None or task.observation.strip() in _EMPTY


def declared_not_found(task: TaskRecord) -> bool:
    """Whether a task's tool said it found nothing: it raised ``NotFound`` or returned
    an empty result (a task that failed otherwise is no such statement)."""
    if task.skipped:
        return False
    if task.is_error:
        return (task.observation or "").startswith(_NOT_FOUND_ERROR)
    return found_nothing(task)


def rejected(task: TaskRecord) -> bool:
    """Whether a human rejected the task's call."""
    return task.is_error and (task.observation or "").startswith(_REJECTED)


@dataclass(frozen=True)
class RoundRecord:
    """What happened in one finished round, for replanning and joining."""

    tasks: Sequence[TaskRecord] = ()
    errors: Sequence[str] = ()
    thought: str | None = None
    reason: str | None = None
    text: str = ""
    """The planner's raw output of the round."""

    @property
    def plan_lines(self) -> list[tuple[str, str | None]]:
        """Each task's ``N. call`` text and its observation."""
        return [(t.text, t.observation) for t in self.tasks]


@dataclass(frozen=True)
class PromptContext:
    """What the engine knows when it asks the planner or the joiner.

    Attributes:
        question: The current user message.
        history: The conversation before it.
        rounds: Every finished round of this question, with observations.
        system_prompt: The user's extra instructions, put before the dialect's own.
        chat: Whether the model takes messages (else one completion prompt).
        last_round: For the joiner: no replan is allowed after this round.
        constrained: Ask the server for constrained decoding where the dialect can.
        value_aids: Under constrained decoding, narrow the values a plan and an answer
            may write (:mod:`~llm_compiler.dialects.grounding`); see
            ``CompilerConfig.value_aids``.
        max_history_chars: Most characters of earlier rounds shown (None: no bound).
        tools: The run's tools, for a joiner prompt that starts with the planner's
            (see :class:`~llm_compiler.dialects.llmcompiler.LLMCompilerDialect`).
    """

    question: str
    history: Sequence[ChatMessage] = ()
    rounds: Sequence[RoundRecord] = ()
    system_prompt: str | None = None
    chat: bool = True
    last_round: bool = False
    constrained: bool = False
    value_aids: bool = True
    max_history_chars: int | None = None
    tools: Sequence[Any] = ()

    def rendered_rounds(self) -> str:
        """The earlier rounds as text, bounded by `max_history_chars`.

        Every dialect shows earlier rounds through this, so none can skip the bound.
        """
        return render_history(self.rounds, self.max_history_chars)

    def joiner_request(self) -> str:
        """The question, the rounds, then the question again (every joiner's request)."""
        return (
            f"Question: {self.question}\n{self.rendered_rounds()}\n"
            f"Answer the question: {self.question}\n"
        )


def preamble(system_prompt: str | None) -> str:
    """The user's system prompt as the first paragraph, or nothing."""
    return f"{system_prompt.strip()}\n\n" if system_prompt and system_prompt.strip() else ""


def messages(system: str, history: Sequence[ChatMessage], request: str) -> list[ChatMessage]:
    """System message, the conversation, then the request as the user's message."""
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=system),
        *chat_context(history),
        ChatMessage(role=MessageRole.USER, content=request),
    ]


def completion_prompt(system: str, history: Sequence[ChatMessage], request: str) -> str:
    """The same text as one prompt for a completion model."""
    if history:
        system += "\nConversation so far:\n" + render_conversation(history) + "\n"
    return system + "\n" + request


def render_conversation(history: Sequence[ChatMessage]) -> str:
    """``role: content`` lines of the earlier conversation."""
    return "\n".join(
        f"{m.role.value}: {m.content}" for m in history if m.content and m.role != "system"
    )


def chat_context(history: Sequence[ChatMessage]) -> list[ChatMessage]:
    """The conversation without other agents' tool-call plumbing (it confuses a planner)."""
    return [
        ChatMessage(role=m.role, content=m.content)
        for m in history
        if m.content and m.role in (MessageRole.USER, MessageRole.ASSISTANT)
    ]


def render_history(rounds: Sequence[RoundRecord], max_chars: int | None = None) -> str:
    """Earlier plans with their observations and the joiner's verdicts.

    Past `max_chars`, the middle is cut (the first plan and the latest results stay).
    """
    out: list[str] = []
    for record in rounds:
        for line, observation in record.plan_lines:
            out.append(line)
            if observation is not None:
                out.append(f"Observation: {observation}")
        out += [f"Plan error: {e}" for e in record.errors]
        if record.thought:
            out.append(f"Thought: {record.thought}")
        if record.reason:
            out.append(f"Replan: {record.reason}")
    return clip_middle("\n".join(out), max_chars)


def clip_middle(text: str, max_chars: int | None) -> str:
    """`text`, or its head and tail with a note of how much was cut from between."""
    if max_chars is None or len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n...({len(text) - 2 * half} characters cut)...\n{text[-half:]}"


__all__ = [
    "ChatMessage",
    "PromptContext",
    "RoundRecord",
    "TaskRecord",
    "chat_context",
    "completion_prompt",
    "messages",
    "preamble",
    "render_conversation",
    "render_history",
]
