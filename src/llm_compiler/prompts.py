"""Prompts of the planner and the joiner, as constants with typed render functions.

Chat models get a system message (instructions, tools, examples), the chat history and a
user message; completion models get the same text as one prompt that ends where the
model should continue. Override the few-shot examples per domain with
``planner_examples=`` / ``joiner_examples=``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.tools import BaseTool

from llm_compiler import tools as _tools

PLANNER_INSTRUCTIONS = """\
Given a question, write a plan of actions that answers it with as many actions running \
in parallel as possible. Each action is one of these {n_actions} types:
{actions}
{join_number}. join(): collects the results of the actions above and either answers the \
question or plans again. It ends every plan.

Rules:
- Write one action per line, numbered: `N. action(arguments)`. Numbers strictly increase.
- Arguments are Python literals: quoted strings, numbers, lists, dicts; or `$N` for the \
result of an earlier action N (for example `math("ratio of $1 to $2")` or `lookup($3)`).
- Only use the actions listed above, with the argument names and types they declare.
- Actions that do not need each other's results must not reference each other: they run \
at the same time.
- You may write `Thought: ...` on its own line before an action.
- Always end with `join()`, then write {end}.
"""

PLANNER_EXAMPLES = """\
Question: Which is older, the Eiffel Tower or the Statue of Liberty, and by how many years?
1. search("Eiffel Tower")
2. search("Statue of Liberty")
3. join()
<END_OF_PLAN>
###
Question: What is the population density of the country whose capital is Canberra?
1. search("Canberra")
Thought: The density needs the country's population and area, found after step 1.
2. join()
<END_OF_PLAN>
###
"""

EXAMPLE_NOTE = "The examples below illustrate the format; their tools may differ from yours.\n"

REPLAN_NOTE = """\
The plan above was not enough. Write a NEW plan that only adds what is missing. \
Number its actions from {next_id}; you may use $N to refer to the results above \
instead of running those actions again.
"""

JOINER_INSTRUCTIONS = """\
Answer a question from the results of a plan that was executed for it.
- Reason about the observations in a short Thought (1-2 sentences); ignore irrelevant ones.
- If they contain what is needed, finish with a concise, complete answer.
- If they do not (an action failed, or information is missing), replan, and say what is \
missing so a new plan can get it.{last_round}
Respond in exactly this format:
Thought: <your reasoning>
Action: Finish(<the final answer for the user>)
or
Thought: <your reasoning>
Action: Replan(<what is missing and why>)
"""

LAST_ROUND_NOTE = (
    "\n- This is the last round: you MUST finish now with the best answer you can give."
)

JOINER_EXAMPLES = """\
Question: Which is older, the Eiffel Tower or the Statue of Liberty?
1. search("Eiffel Tower")
Observation: The Eiffel Tower was completed in 1889.
2. search("Statue of Liberty")
Observation: The Statue of Liberty was dedicated in 1886.
Thought: 1886 is before 1889.
Action: Finish(The Statue of Liberty (1886) is 3 years older than the Eiffel Tower (1889).)
###
Question: What is the population of the country whose capital is Canberra?
1. search("Canberra")
Observation: Canberra is the capital city of Australia.
Thought: I know the country but not its population.
Action: Replan(Search for the population of Australia.)
###
"""


@dataclass(frozen=True)
class RoundRecord:
    """What happened in one finished round, for replanning and joining."""

    plan_lines: list[tuple[str, str | None]] = field(default_factory=list)
    """Each task's ``N. call`` text and its observation (None if it has none)."""
    errors: list[str] = field(default_factory=list)
    thought: str | None = None
    reason: str | None = None


def render_actions(tools: Sequence[BaseTool]) -> str:
    """``1. name(sig): description`` lines for the planner."""
    return "\n".join(f"{i}. {_action(t)}" for i, t in enumerate(tools, 1))


@functools.lru_cache(maxsize=1024)
def _action(tool: BaseTool) -> str:
    # Rendering a schema costs ~0.2 ms a tool; tools do not change, so once is enough.
    return f"{_tools.signature(tool)}: {_tools.description(tool)}"


def render_history(rounds: Sequence[RoundRecord]) -> str:
    """Earlier plans with their observations and the joiner's verdicts."""
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
    return "\n".join(out)


@dataclass(frozen=True)
class PlannerInput:
    """Everything the planner prompt is built from."""

    tools: Sequence[BaseTool]
    question: str
    history: Sequence[ChatMessage] = ()
    rounds: Sequence[RoundRecord] = ()
    next_id: int = 1
    examples: str | None = None
    system_prompt: str | None = None

    def system(self) -> str:
        """The instructions, the tool list and the examples."""
        text = _preamble(self.system_prompt) + PLANNER_INSTRUCTIONS.format(
            n_actions=len(self.tools) + 1,
            actions=render_actions(self.tools),
            join_number=len(self.tools) + 1,
            end="<END_OF_PLAN>",
        )
        examples = PLANNER_EXAMPLES if self.examples is None else self.examples
        if examples is PLANNER_EXAMPLES:
            text += "\n" + EXAMPLE_NOTE
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question, plus the earlier rounds on a replan."""
        text = f"Question: {self.question}\n"
        if self.rounds:
            text += render_history(self.rounds) + "\n" + REPLAN_NOTE.format(next_id=self.next_id)
        return text

    def messages(self) -> list[ChatMessage]:
        """Messages for a chat model."""
        return _messages(self.system(), self.history, self.request())

    def prompt(self) -> str:
        """One prompt for a completion model; it ends where the plan should begin."""
        text = _completion_prompt(self.system(), self.history, self.request())
        return text + "New plan:\n" if self.rounds else text


@dataclass(frozen=True)
class JoinerInput:
    """Everything the joiner prompt is built from."""

    question: str
    history: Sequence[ChatMessage] = ()
    rounds: Sequence[RoundRecord] = ()
    last_round: bool = False
    examples: str | None = None
    system_prompt: str | None = None

    def system(self) -> str:
        """The instructions and the examples."""
        note = LAST_ROUND_NOTE if self.last_round else ""
        text = _preamble(self.system_prompt) + JOINER_INSTRUCTIONS.format(last_round=note)
        examples = JOINER_EXAMPLES if self.examples is None else self.examples
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question with every round's actions and observations."""
        return f"Question: {self.question}\n{render_history(self.rounds)}\n"

    def messages(self) -> list[ChatMessage]:
        """Messages for a chat model."""
        return _messages(self.system(), self.history, self.request())

    def prompt(self) -> str:
        """One prompt for a completion model; it ends where the Thought should begin."""
        return _completion_prompt(self.system(), self.history, self.request()) + "Thought:"


def _messages(system: str, history: Sequence[ChatMessage], request: str) -> list[ChatMessage]:
    return [
        ChatMessage(role=MessageRole.SYSTEM, content=system),
        *_chat_context(history),
        ChatMessage(role=MessageRole.USER, content=request),
    ]


def _completion_prompt(system: str, history: Sequence[ChatMessage], request: str) -> str:
    if history:
        system += "\nConversation so far:\n" + render_conversation(history) + "\n"
    return system + "\n" + request


def _preamble(system_prompt: str | None) -> str:
    return f"{system_prompt.strip()}\n\n" if system_prompt and system_prompt.strip() else ""


def render_conversation(history: Sequence[ChatMessage]) -> str:
    """``role: content`` lines of the earlier conversation."""
    return "\n".join(
        f"{m.role.value}: {m.content}" for m in history if m.content and m.role != "system"
    )


def _chat_context(history: Sequence[ChatMessage]) -> list[ChatMessage]:
    # Tool-call plumbing of other agents confuses a text planner: keep the conversation.
    return [
        ChatMessage(role=m.role, content=m.content)
        for m in history
        if m.content and m.role in (MessageRole.USER, MessageRole.ASSISTANT)
    ]
