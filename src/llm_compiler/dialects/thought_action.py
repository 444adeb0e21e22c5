"""The joiner: reads a round's observations and answers or asks for a new plan.

The format (shared by the LLMCompiler and JSON plan dialects)::

    Thought: <reasoning>
    Action: Finish(<the answer>)        or        Action: Replan(<what is missing>)

Parsing is linear in the text and tolerant of what small models write: the answer may
span lines and hold parentheses, Markdown headings and the word "Replan"; a missing
closing parenthesis is fine; ``Thought: ... Action: Finish(42)`` may stand on one line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import JoinerDecision, LLMRequest
from llm_compiler.dialects.grammar import joiner_grammar
from llm_compiler.dialects.grounding import answer_values
from llm_compiler.dialects.prompting import PromptContext

END_OF_RESPONSE = "<END_OF_RESPONSE>"
#: Stops only on a sentinel no answer contains (``###`` or ``Question:`` may be content).
JOIN_STOP = (END_OF_RESPONSE,)

JOINER_INSTRUCTIONS = """\
Answer a question from the results of a plan that was executed for it.
- Reason about the observations in a short Thought (1-2 sentences); ignore irrelevant ones.
- If they contain what is needed, finish with a concise, complete answer that states \
the values asked for. Copy numbers and names from the observations; a difference, sum \
or ratio is the result of a calculation action, never your own arithmetic.
- If they do not (an action failed, or information is missing), replan, and say what is \
missing so a new plan can get it.{last_round}
- If nothing answers the question, finish with "I could not find ..." and what is \
missing; never guess.
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
<END_OF_RESPONSE>
Question: Who runs the company that makes the Walkman?
1. search("Walkman")
Observation: The Walkman is a portable music player made by Sony.
Thought: I know the company but not who runs it.
Action: Replan(Search for who runs Sony.)
<END_OF_RESPONSE>
"""


@dataclass(frozen=True)
class JoinerInput:
    """The Thought/Action joiner's prompt for one round."""

    context: PromptContext
    examples: str | None = None
    prefix: str = ""
    """Text the prompt starts with (the planner's instructions, tools and examples, so a
    server that reuses the previous prompt's prefix keeps them evaluated); it holds the
    user's system prompt."""

    def system(self) -> str:
        """The instructions and the examples."""
        note = LAST_ROUND_NOTE if self.context.last_round else ""
        text = self.prefix + "\n" if self.prefix else prompting.preamble(self.context.system_prompt)
        text += JOINER_INSTRUCTIONS.format(last_round=note)
        examples = JOINER_EXAMPLES if self.examples is None else self.examples
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question, every round's actions and observations, then the question again.

        Restating the question right before the reply measurably helps small models,
        which otherwise answer only about the last observation they read.
        """
        return self.context.joiner_request()

    def llm_request(self) -> LLMRequest:
        """Messages for a chat model; a prompt ending in ``Thought:`` for the others.

        With constrained decoding, a grammar allows exactly one Thought line and one
        Action (no Replan on the last round), and with value aids a grounded answer: its
        numbers are the question's and the observations', and it states a value found or
        that it could not find one (see :func:`~llm_compiler.dialects.grounding.answer_values`).
        """
        ctx = self.context
        extras: dict[str, Any] = {}
        if ctx.constrained:
            numbers, anchors = answer_values(ctx) if ctx.value_aids else (None, [])
            extras["grammar"] = joiner_grammar(
                allow_replan=not ctx.last_round,
                thought_label=ctx.chat,
                numbers=numbers,
                anchors=anchors,
            )
        if ctx.chat:
            return LLMRequest(
                messages=prompting.messages(self.system(), ctx.history, self.request()),
                stop=JOIN_STOP,
                extras=extras,
            )
        prompt = prompting.completion_prompt(self.system(), ctx.history, self.request())
        return LLMRequest(
            prompt=prompt + "Thought:", stop=JOIN_STOP, prefill="Thought:", extras=extras
        )


# `[ \t]` rather than `\s` at line starts: `\s*` would run across blank lines from every
# line start (quadratic in the number of blank lines).
_ACTION = re.compile(
    r"(?:^[ \t*#>-]*|(?<=[.!?;:)\]*`\"'])[ \t]*|(?<=[ \t]))action[ \t]*:[ \t]*(finish|replan)\b"
    r"[ \t]*(\(|:)?",
    re.I | re.M,
)
_THOUGHT = re.compile(r"(?:^|(?<=\s))thought[ \t]*:[ \t]*", re.I)
_STOP_LINE = re.compile(
    r"^[ \t]*(?:thought|action|question|observation)[ \t]*:|^[ \t]*<END_OF_RESPONSE>", re.I | re.M
)


def _strip_close(body: str) -> str:
    """Drop the ``)`` that closes ``Finish(`` and separator debris after it (``###``).

    Only the last parenthesis can close the call, and only when the parentheses are
    unbalanced: an answer's own parentheses stay.
    """
    close = body.rfind(")")
    if close < 0 or body.count(")") <= body.count("("):
        return body
    if any(ch.isalnum() for ch in body[close + 1 :]):
        return body  # text after it: the answer goes on, the ")" is the model's
    return body[:close].rstrip()


def parse_joiner_output(text: str) -> JoinerDecision:
    """Parse ``Thought: ...`` / ``Action: Finish(answer)`` or ``Action: Replan(reason)``.

    Text without an ``Action:`` is taken as the answer. A blank answer comes back with
    empty ``content`` (the caller treats it as a failed join, never as an answer).
    """
    text = text.replace(END_OF_RESPONSE, "\n")
    m = _ACTION.search(text)
    before = text[: m.start()] if m else text
    t = _THOUGHT.search(before)
    thought = (before[t.end() :].strip() or None) if t else None
    if not m:
        body = before[: t.start()].strip() if t else before.strip()
        return JoinerDecision("finish", body or (thought or ""), thought)
    rest = text[m.end() :]
    stop = _STOP_LINE.search(rest)
    body = (rest[: stop.start()] if stop else rest).strip()
    if m.group(2) == "(":
        body = _strip_close(body)
    action: Literal["finish", "replan"] = "finish" if m.group(1).lower() == "finish" else "replan"
    if action == "finish" and not body:
        body = thought or ""
    return JoinerDecision(action, body, thought)


def example_replies(examples: str) -> list[tuple[str, JoinerDecision]]:
    """Each Thought/Action joiner example of `examples` as (its question and
    observations, its parsed reply); blocks without a reply are skipped."""
    out = []
    for block in examples.split(END_OF_RESPONSE):
        head, sep, reply = block.partition("\nThought:")
        if sep and head.strip():
            out.append((head, parse_joiner_output("Thought:" + reply)))
    return out
