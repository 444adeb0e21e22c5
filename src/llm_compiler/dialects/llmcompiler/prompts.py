"""The LLMCompiler planner prompt: instructions, tool lines, few-shot plans, replans."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler import tools as _tools
from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools.spec import tool_spec

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
Question: What is the population density of the country whose capital is Canberra?
1. search("Canberra")
Thought: The density needs the country's population and area, found after step 1.
2. join()
<END_OF_PLAN>
"""

EXAMPLE_NOTE = "The examples below illustrate the format; their tools may differ from yours.\n"
GENERATED_NOTE = "The example below shows the format with your actions; its values are made up.\n"
#: The tool the built-in examples call: they are shown only to runs that have it.
EXAMPLE_TOOL = "search"

REPLAN_NOTE = """\
The plan above was not enough. Write a NEW plan that only adds what is missing. \
Number its actions from {next_id}; you may use $N to refer to the results above \
instead of running those actions again.
"""


def render_actions(tools: Sequence[BaseTool]) -> str:
    """``1. name(sig): description`` lines for the planner."""
    return "\n".join(f"{i}. {_tools.action_line(t)}" for i, t in enumerate(tools, 1))


@dataclass(frozen=True)
class PlannerInput:
    """The LLMCompiler planner prompt for one round."""

    context: PlannerContext
    examples: str | None = None

    def system(self) -> str:
        """The instructions, the tool list and the examples.

        Unconstrained, examples never teach a tool the run does not have (small models
        copy them): the built-in ones are shown only to runs with a ``search`` tool, others
        get an example generated from their own first tool (two independent calls and a
        join). Under a grammar the model cannot call a tool it was not given, and the
        built-in examples (real questions, realistic values) give better plans: on 20 BFCL
        items the embedded model got 15 of 52 calls right with them, 6 with generated ones
        (unconstrained: 0 and 2).
        """
        tools = self.context.tools
        text = prompting.preamble(self.context.prompt.system_prompt) + PLANNER_INSTRUCTIONS.format(
            n_actions=len(tools) + 1,
            actions=render_actions(tools),
            join_number=len(tools) + 1,
            end=END_OF_PLAN,
        )
        examples = self.examples
        if examples is None:
            names = {t.metadata.get_name() for t in tools}
            if EXAMPLE_TOOL in names or self.context.constrained:
                examples, note = PLANNER_EXAMPLES, EXAMPLE_NOTE
            else:
                examples, note = generated_example(tools), GENERATED_NOTE
            text += "\n" + note if examples else ""
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question, plus the earlier rounds on a replan."""
        ctx = self.context.prompt
        text = f"Question: {ctx.question}\n"
        if ctx.rounds:
            text += ctx.rendered_rounds() + "\n" + REPLAN_NOTE.format(next_id=self.context.next_id)
        return text

    def messages(self) -> list[prompting.ChatMessage]:
        """Messages for a chat model."""
        return prompting.messages(self.system(), self.context.prompt.history, self.request())

    def prompt(self) -> str:
        """One prompt for a completion model; it ends where the plan should begin."""
        ctx = self.context.prompt
        text = prompting.completion_prompt(self.system(), ctx.history, self.request())
        return text + "New plan:\n" if ctx.rounds else text


_SAMPLES: dict[str, tuple[Any, Any]] = {
    "string": ("A", "B"),
    "integer": (1, 2),
    "number": (1.5, 2.5),
    "boolean": (True, False),
}


def _sample(schema: Mapping[str, Any], which: int) -> Any:
    """A made-up value of the schema's type (an allowed one for enums)."""
    if "enum" in schema and schema["enum"]:
        values = list(schema["enum"])
        return values[min(which, len(values) - 1)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        schema = next((o for o in options if o.get("type") != "null"), options[0])
    kind = schema.get("type")
    if kind == "array":
        return [_sample(schema.get("items", {}), which)]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _sample(v, which) for k, v in props.items() if k in schema.get("required", ())}
    return _SAMPLES.get(str(kind), ("A", "B"))[which]


def _literal(value: Any) -> str:
    """A value as the plan grammar writes it (double-quoted strings, Python words)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def generated_example(tools: Sequence[BaseTool]) -> str:
    """A format example with the run's first tool: two independent calls, then join."""
    specs = [tool_spec(t) for t in tools]
    spec = next((s for s in specs if s.call_form), None)
    if spec is None:
        return ""
    lines = []
    for which in (0, 1):
        args = ", ".join(
            f"{p.name}={_literal(_sample(p.schema, which))}" for p in spec.params if p.required
        )
        lines.append(f"{which + 1}. {spec.name}({args})")
    return "Question: (an example)\n" + "\n".join(lines) + "\n3. join()\n" + END_OF_PLAN + "\n"
