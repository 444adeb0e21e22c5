"""The LLMCompiler plan format (the paper's): numbered calls, ``$N`` references, ``join()``.

::

    Thought: I need both lengths.
    1. search("Golden Gate Bridge")
    2. search("Brooklyn Bridge")
    3. calculator("$1 - $2")
    4. join()<END_OF_PLAN>
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from llm_compiler.dialects.base import JoinerDecision, LLMRequest, PlannerContext
from llm_compiler.dialects.grammar import plan_grammar
from llm_compiler.dialects.grounding import plan_writable, unusable_ids
from llm_compiler.dialects.json_joiner import JsonJoinerInput, parse_json_decision
from llm_compiler.dialects.llmcompiler.prompts import ExampleSource, PlannerInput
from llm_compiler.dialects.plan_lines import PlanParser, parse_task_line
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.dialects.selected_answer import (
    SelectJoinerInput,
    parse_selected,
    selected_answer,
)
from llm_compiler.dialects.thought_action import JoinerInput, parse_joiner_output
from llm_compiler.plan import END_OF_PLAN

#: The joiner's reply: ``Thought:``/``Action:`` text, one JSON object, or (constrained
#: completion models) an answer the engine renders from the observations the model selects.
JoinerFormat = Literal["text", "json", "select"]
#: The planner's stop sequences: its end marker, and the start of a new few-shot example.
PLAN_STOP = (END_OF_PLAN, "\nQuestion:")


@dataclass(frozen=True)
class LLMCompilerDialect:
    """Plans as numbered ``tool(args)`` lines; the Thought/Action joiner.

    Args:
        planner_examples: Few-shot plans (``None``: built-in, marked as illustrations;
            ``""``: none). Write them with your own tools: small models copy examples.
        joiner_examples: Few-shot joiner replies (``None``: built-in; ``""``: none).
        constrained_examples: With constrained decoding and no `planner_examples`, the
            few-shot plans shown: ``"mixed"`` (the built-in ones, then one generated from
            the run's tools), ``"own"`` (only the generated one) or ``"builtin"``.
        shared_prefix: Under constrained decoding, start the joiner's prompt with the
            planner's instructions, tools and examples (see :meth:`joiner_request`).
            Off by default: the 270M model, shown the planner's text first, answered
            from the wrong example (naming a value only an example held) where without
            it it answered right.
        joiner: The joiner's reply: ``"text"`` (``Thought:``/``Action: Finish(...)``,
            a grounded GBNF answer when constrained) or ``"json"`` (one JSON object,
            :mod:`~llm_compiler.dialects.json_joiner`: a JSON schema as the chat
            model's ``response_format``, its GBNF on completion models) or
            ``"select"`` (under constrained decoding on completion models, the answer
            is rendered from the results, the model only choosing which sentence of an
            observation to quote, :mod:`~llm_compiler.dialects.selected_answer`; else
            as ``"text"``). Measured on the embedded model: see the documentation's
            "Evaluation" page (``docs/evaluation.md``).
    """

    planner_examples: str | None = None
    joiner_examples: str | None = None
    constrained_examples: ExampleSource = "varied"
    name: str = "llmcompiler"
    grammar_max_tasks: int = 8
    shared_prefix: bool = False
    joiner: JoinerFormat = "select"

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        """Messages for chat models, one few-shot prompt for completion models.

        With constrained decoding the request carries a GBNF grammar from the tools
        (:func:`~llm_compiler.dialects.grammar.plan_grammar`): only given tools, typed
        arguments, references to earlier tasks that found something, numbered lines,
        and ``join()`` after at most ``grammar_max_tasks`` tasks (small models otherwise
        repeat calls); with ``value_aids`` every literal comes from the question, what
        earlier rounds found, or the tools' declared values, and a replan cannot write
        again a call that failed (:func:`~llm_compiler.dialects.grounding.plan_writable`).
        """
        inputs = PlannerInput(context, self.planner_examples, self.constrained_examples)
        extras: dict[str, Any] = {}
        if context.constrained:
            aids = context.prompt.value_aids
            # Earlier tasks (never join lines), with value aids only those that found something.
            known = context.known_ids - (unusable_ids(context.prompt) if aids else set())
            extras["grammar"] = plan_grammar(
                context.tools,
                first_id=context.next_id,
                known_ids=sorted(known),
                max_tasks=min(context.max_tasks, self.grammar_max_tasks),
                writable=plan_writable(context.prompt, context.tools) if aids else None,
            )
        if context.prompt.chat:
            return LLMRequest(messages=inputs.messages(), stop=PLAN_STOP, extras=extras)
        return LLMRequest(prompt=inputs.prompt(), stop=PLAN_STOP, extras=extras)

    def warm_request(self, context: PlannerContext) -> LLMRequest | None:
        """A request whose prompt is the planner's static part: instructions, tools,
        examples, up to the next ``Question:`` (completion models under constrained
        decoding without `shared_prefix`; else None). The engine sends it after an
        answer, so the next question's planner reads only its question."""
        if self.shared_prefix or not context.constrained or context.prompt.chat:
            return None
        inputs = PlannerInput(context, self.planner_examples, self.constrained_examples)
        return LLMRequest(prompt=inputs.system() + "\nQuestion:")

    def plan_parser(self, context: PlannerContext) -> PlanParser:
        """An incremental parser of this round's plan lines: each line one task, but a
        repeated call of a tool of ``context.merged``."""
        return PlanParser(
            known_ids=context.known_ids,
            taken_ids=context.taken_ids,
            round=context.round,
            max_tasks=context.max_tasks,
            max_plan_chars=context.max_plan_chars,
            max_plan_errors=context.max_plan_errors,
            max_line_chars=context.max_line_chars,
            max_arg_depth=context.max_arg_depth,
            merged=context.merged,
        )

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        """The Thought/Action joiner prompt (with its grammar when constrained).

        With `shared_prefix` and constrained decoding (a llama.cpp server, which keeps
        only the previous prompt's evaluated prefix), the joiner's prompt starts with the
        planner's instructions, tools and examples: the next question's planner then
        finds them evaluated and reads only its question before its first task.
        """
        prefix = ""
        if self.shared_prefix and context.constrained and context.tools:
            planner = PlannerContext(prompt=context, tools=context.tools, constrained=True)
            prefix = PlannerInput(
                planner, self.planner_examples, self.constrained_examples
            ).system()
        if self.joiner == "json":
            return JsonJoinerInput(context, self.joiner_examples, prefix).llm_request()
        if self._selects(context):
            return SelectJoinerInput(context, self.joiner_examples, prefix).llm_request()
        return JoinerInput(context, self.joiner_examples, prefix).llm_request()

    def _selects(self, context: PromptContext) -> bool:
        return self.joiner == "select" and context.constrained and not context.chat

    def forced_decision(self, context: PromptContext) -> JoinerDecision | None:
        """With the ``"select"`` joiner, the rendered answer when it leaves the model
        nothing to choose (every result one number or sentence, or nothing found); the
        engine then makes no joiner call."""
        if not self._selects(context):
            return None
        answer = selected_answer(context)
        return None if answer is None else JoinerDecision("finish", answer)

    def parse_decision(self, text: str) -> JoinerDecision:
        """``Action: Finish(...)`` or ``Action: Replan(...)`` (or the JSON reply, or the
        rendered answer)."""
        if self.joiner == "json":
            return parse_json_decision(text)
        return parse_selected(text) if self.joiner == "select" else parse_joiner_output(text)


__all__ = ["END_OF_PLAN", "LLMCompilerDialect", "PlanParser", "parse_task_line"]
