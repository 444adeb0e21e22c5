"""Chain-of-Abstraction (CoA): reasoning with inline calls, filled in, then answered.

::

    Question: How much more did Uber make than Lyft in 2021?
    Reasoning: Uber made [FUNC search("Uber revenue 2021") = y1] and Lyft
    [FUNC search("Lyft revenue 2021") = y2], [FUNC subtract(y1, y2) = y3] more.

The planner call writes the reasoning; each call runs as soon as its ``]`` has streamed
and its inputs are done (independent calls in parallel). The joiner call gets the
reasoning with the results filled in and writes the answer; it never replans. A
reasoning that calls nothing is the answer itself (no second call).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from llama_index.core.llms import ChatMessage, MessageRole

from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import JoinerDecision, LLMRequest, PlannerContext
from llm_compiler.dialects.coa.parser import CoAParser, fill_in, plain
from llm_compiler.dialects.coa.prompts import (
    ANSWER_EXAMPLES,
    ANSWER_INSTRUCTIONS,
    EXAMPLE_NOTE,
    REASONING_EXAMPLES,
    REASONING_INSTRUCTIONS,
    check_template,
    render_functions,
)
from llm_compiler.dialects.prompting import PromptContext, RoundRecord

#: A completion model would go on with another few-shot question.
COA_STOP = ("\nQuestion:",)
_LEAD = re.compile(r"^\s*(?:reasoning|answer|response)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class CoADialect:
    """Chain-of-Abstraction as a plan dialect.

    Args:
        reasoning_examples: Few-shot reasonings (``None``: built-in; ``""``: none).
        answer_examples: Few-shot answers from filled-in reasonings (same defaults).
        reasoning_template: Replaces the whole reasoning prompt; a ``str.format``
            template with ``{functions}`` and ``{question}`` (the legacy pack's
            ``reasoning_prompt_template``).
        answer_template: Replaces the answer prompt; ``{question}`` and
            ``{prev_reasoning}`` (the legacy ``refine_reasoning_prompt_template``).
    """

    reasoning_examples: str | None = None
    answer_examples: str | None = None
    reasoning_template: str | None = None
    answer_template: str | None = None
    name: str = "coa"

    def __post_init__(self) -> None:
        if self.reasoning_template is not None:
            check_template(self.reasoning_template, "functions", "question")
        if self.answer_template is not None:
            check_template(self.answer_template, "question", "prev_reasoning")

    # ------------------------------------------------------------------ planner

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        """The reasoning prompt: instructions, functions, examples, the question."""
        ctx = context.prompt
        functions = render_functions(context.tools)
        if self.reasoning_template is not None:
            text = self.reasoning_template.format(functions=functions, question=ctx.question)
            return _single(ctx, prompting.preamble(ctx.system_prompt) + text)
        system = prompting.preamble(ctx.system_prompt)
        system += REASONING_INSTRUCTIONS.format(functions=functions)
        system += _examples(self.reasoning_examples, REASONING_EXAMPLES)
        request = f"Question: {ctx.question}\n"
        if ctx.chat:
            return LLMRequest(
                messages=prompting.messages(system, ctx.history, request), stop=COA_STOP
            )
        prompt = prompting.completion_prompt(system, ctx.history, request)
        return LLMRequest(prompt=prompt + "Reasoning:", stop=COA_STOP)

    def plan_parser(self, context: PlannerContext) -> CoAParser:
        """A streaming parser of this round's inline calls."""
        return CoAParser(
            next_id=context.next_id,
            round=context.round,
            max_tasks=context.max_tasks,
            known_ids=context.known_ids,
        )

    def answer_without_join(self, record: RoundRecord) -> str | None:
        """A reasoning that calls nothing is the answer (None when it is blank)."""
        if record.tasks:
            return None
        answer = _LEAD.sub("", record.text).strip()
        return answer or None

    # ------------------------------------------------------------------ joiner

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        """The answer prompt over the filled-in reasoning."""
        reasoning = "\n".join(fill_in(r.text, r.tasks).strip() for r in context.rounds)
        errors = [e for r in context.rounds for e in r.errors]
        if errors:
            reasoning += "\n" + "\n".join(f"(Note: {e})" for e in errors)
        if self.answer_template is not None:
            text = self.answer_template.format(question=context.question, prev_reasoning=reasoning)
            return _single(context, prompting.preamble(context.system_prompt) + text)
        system = prompting.preamble(context.system_prompt) + ANSWER_INSTRUCTIONS
        system += _examples(self.answer_examples, ANSWER_EXAMPLES, note=False)
        request = f"Question: {context.question}\nReasoning: {reasoning}\n"
        if context.chat:
            return LLMRequest(
                messages=prompting.messages(system, context.history, request), stop=COA_STOP
            )
        prompt = prompting.completion_prompt(system, context.history, request)
        return LLMRequest(prompt=prompt + "Answer:", stop=COA_STOP)

    def parse_decision(self, text: str) -> JoinerDecision:
        """The whole reply, in plain words (no ``[FUNC ...]`` markup), is the answer;
        CoA never replans."""
        return JoinerDecision("finish", plain(_LEAD.sub("", text)).strip())


def _examples(given: str | None, default: str, note: bool = True) -> str:
    examples = default if given is None else given
    if not examples:
        return ""
    lead = "\n" + EXAMPLE_NOTE if note and given is None else "\n"
    return lead + examples.rstrip() + "\n"


def _single(ctx: PromptContext, text: str) -> LLMRequest:
    """A user's template: one user message after the conversation, or one prompt."""
    if ctx.chat:
        messages = [
            *prompting.chat_context(ctx.history),
            ChatMessage(role=MessageRole.USER, content=text),
        ]
        return LLMRequest(messages=messages, stop=COA_STOP)
    history = prompting.render_conversation(ctx.history)
    prompt = f"Conversation so far:\n{history}\n\n{text}" if history else text
    return LLMRequest(prompt=prompt, stop=COA_STOP)


__all__ = ["COA_STOP", "CoADialect", "CoAParser", "fill_in"]
