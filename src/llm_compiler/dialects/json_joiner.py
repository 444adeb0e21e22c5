"""A joiner that answers in JSON, for models with structured output.

The reply is one object::

    {"verdict": "answer", "evidence": ["2737", "1834"], "answer": "It is 903 m longer."}

``verdict`` is ``answer`` or ``replan`` (then ``answer`` says what is missing);
``evidence`` lists the observed values the answer rests on. The request carries
:func:`joiner_schema` as ``response_format`` for chat models (OpenAI structured output)
and as the GBNF of the same object (:func:`json_joiner_grammar`) for completion models
on llama.cpp. Under constrained decoding with value aids the evidence is grounded: each
item is one of the values the observations found
(:func:`~llm_compiler.dialects.grounding.answer_values`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import JoinerDecision, LLMRequest
from llm_compiler.dialects.grammar import gbnf_literal
from llm_compiler.dialects.grounding import answer_values, names, number_forms
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.dialects.thought_action import (
    END_OF_RESPONSE,
    JOIN_STOP,
    JOINER_EXAMPLES,
    example_replies,
    parse_joiner_output,
)

JSON_JOINER_INSTRUCTIONS = """\
Answer a question from the results of a plan that was executed for it.
Reply with one JSON object: {{"verdict": "answer" or "replan", "evidence": [values], \
"answer": "text"}}.
- "evidence": the values in the observations that answer the question, copied exactly.
- "answer" (verdict "answer"): a concise, complete answer that states those values. A \
difference, sum or ratio is the result of a calculation action, never your own arithmetic. \
If nothing answers the question, the answer is "I could not find ..." and what is \
missing; never guess.
- Verdict "replan" (an action failed, or information is missing): the answer says what \
is missing so a new plan can get it.{last_round}
"""

LAST_ROUND_NOTE = '\n- This is the last round: the verdict MUST be "answer".'
#: Most characters of an answer, and most evidence items, under constrained decoding.
MAX_ANSWER_CHARS, MAX_EVIDENCE = 240, 6
_VERDICTS = ("answer", "replan")


def joiner_schema(
    *, allow_replan: bool = True, evidence: Sequence[str] | None = None
) -> dict[str, Any]:
    """The JSON Schema of a joiner reply (valid in OpenAI's strict structured-output mode).

    Args:
        allow_replan: False on the last round: the verdict can only be ``answer``.
        evidence: If given, the values an evidence item may be (none: an empty list).
    """
    items: dict[str, Any] = {"type": "string"}
    if evidence is not None:
        items = {"type": "string", "enum": list(dict.fromkeys(evidence))} if evidence else items
    array: dict[str, Any] = {"type": "array", "items": items}
    if evidence is not None and not evidence:
        array["maxItems"] = 0
    verdicts = ["answer", "replan"] if allow_replan else ["answer"]
    return {
        "type": "object",
        "properties": {
            "verdict": {"type": "string", "enum": verdicts},
            "evidence": array,
            "answer": {"type": "string"},
        },
        "required": ["verdict", "evidence", "answer"],
        "additionalProperties": False,
    }


def json_joiner_grammar(*, allow_replan: bool = True, evidence: Sequence[str] | None = None) -> str:
    """GBNF for the object of :func:`joiner_schema`, keys in its order, one line.

    The answer is a JSON string of at most ``MAX_ANSWER_CHARS`` characters (a small
    model may otherwise write on without closing it); at most ``MAX_EVIDENCE`` items.
    """
    verdicts = ["answer", "replan"] if allow_replan else ["answer"]
    values = list(dict.fromkeys(evidence or ()))
    item = (
        "str"
        if evidence is None
        else " | ".join(gbnf_literal(json.dumps(v, ensure_ascii=False)) for v in values)
    )
    items = f'(item (", " item){{0,{MAX_EVIDENCE - 1}}})? ' if item else ""
    rules = [
        f'root ::= "{{\\"verdict\\": " verdict ", \\"evidence\\": [" {items}'
        '"], \\"answer\\": " answer "}"',
        "verdict ::= " + " | ".join(gbnf_literal(json.dumps(v)) for v in verdicts),
        f'answer ::= "\\"" str-char{{1,{MAX_ANSWER_CHARS}}} "\\""',
        'str ::= "\\"" str-char* "\\""',
        'str-char ::= [^"\\\\\\x00-\\x1F\\x7F] | "\\\\" ["\\\\nrt] | "\\\\u" [0-9a-fA-F]{4}',
    ]
    if item:
        rules.append(f"item ::= {item}")
    return "\n".join(rules) + "\n"


def json_examples(examples: str) -> str:
    """Thought/Action joiner examples written as JSON replies.

    Each example's ``Finish(...)``/``Replan(...)`` becomes the answer; its evidence is
    the observed values (numbers as an answer may write them, names) that the answer
    states, in the order it states them.
    """
    out = []
    for head, decision in example_replies(examples):
        observed = [
            line[12:].strip() for line in head.splitlines() if line.startswith("Observation:")
        ]
        reply_json = reply_text(decision, _evidence(decision.content, observed))
        out.append(f"{head.strip()}\n{reply_json}\n{END_OF_RESPONSE}\n")
    return "".join(out)


def _evidence(answer: str, observed: Sequence[str]) -> list[str]:
    found = [*number_forms(observed), *names(observed)]
    hits = {
        v: m.start()
        for v in found
        if (m := re.search(rf"(?<![\w.,]){re.escape(v)}(?![\w]|[.,]\d)", answer))
    }
    ordered = sorted(hits, key=lambda v: (hits[v], -len(v)))
    kept: list[str] = []
    for v in ordered:
        if not any(v in k for k in kept):
            kept.append(v)
    return kept


def reply_text(decision: JoinerDecision, evidence: Sequence[str]) -> str:
    """A decision as the one-line JSON reply the grammar writes."""
    verdict = "answer" if decision.action == "finish" else "replan"
    body = json.dumps({"verdict": verdict, "evidence": list(evidence)}, ensure_ascii=False)
    return body[:-1] + f', "answer": {json.dumps(decision.content, ensure_ascii=False)}}}'


@dataclass(frozen=True)
class JsonJoinerInput:
    """The JSON joiner's prompt for one round (examples in Thought/Action form are
    converted, see :func:`json_examples`)."""

    context: PromptContext
    examples: str | None = None
    prefix: str = ""

    def system(self) -> str:
        """The instructions and the examples."""
        note = LAST_ROUND_NOTE if self.context.last_round else ""
        text = self.prefix + "\n" if self.prefix else prompting.preamble(self.context.system_prompt)
        text += JSON_JOINER_INSTRUCTIONS.format(last_round=note)
        examples = json_examples(JOINER_EXAMPLES if self.examples is None else self.examples)
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question, the rounds, then the question again (as the text joiner)."""
        return self.context.joiner_request()

    def llm_request(self) -> LLMRequest:
        """A chat request with ``response_format``, or a prompt with the GBNF grammar.

        Unconstrained, the request carries neither (the parser reads what comes).
        """
        ctx = self.context
        evidence = answer_values(ctx)[1] if ctx.constrained and ctx.value_aids else None
        allow_replan = not ctx.last_round
        extras: dict[str, Any] = {}
        if ctx.constrained and ctx.chat:
            schema = joiner_schema(allow_replan=allow_replan, evidence=evidence)
            extras["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "joiner", "schema": schema, "strict": True},
            }
        elif ctx.constrained:
            extras["grammar"] = json_joiner_grammar(allow_replan=allow_replan, evidence=evidence)
        if ctx.chat:
            messages = prompting.messages(self.system(), ctx.history, self.request())
            return LLMRequest(messages=messages, stop=JOIN_STOP, extras=extras)
        prompt = prompting.completion_prompt(self.system(), ctx.history, self.request())
        return LLMRequest(prompt=prompt, stop=JOIN_STOP, extras=extras)


def parse_json_decision(text: str) -> JoinerDecision:
    """The decision in a JSON reply; text that holds no such object is read as a
    Thought/Action reply (:func:`~llm_compiler.dialects.thought_action.parse_joiner_output`).

    The evidence becomes the decision's thought (``Evidence: 4806; 4478``).
    """
    start = text.find("{")
    try:
        reply, _ = json.JSONDecoder().raw_decode(text[start:]) if start >= 0 else (None, 0)
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or reply.get("verdict") not in _VERDICTS:
        return parse_joiner_output(text)
    answer = reply.get("answer")
    evidence = reply.get("evidence")
    items = [str(e) for e in evidence] if isinstance(evidence, list) else []
    thought = "Evidence: " + "; ".join(items) if items else None
    action: Literal["finish", "replan"] = "finish" if reply["verdict"] == "answer" else "replan"
    return JoinerDecision(action, answer.strip() if isinstance(answer, str) else "", thought)
