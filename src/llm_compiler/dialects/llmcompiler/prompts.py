"""The LLMCompiler planner prompt: instructions, tool lines, few-shot plans, replans."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llama_index.core.tools import BaseTool

from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.grounding import compute_tool
from llm_compiler.dialects.llmcompiler.examples import own_tools_example, varied_examples
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools import render as _tools

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
- Copy names and values from the question exactly as it writes them.{compute}
- You may write `Thought: ...` on its own line before an action.
- Always end with `join()`, then write {end}.
"""

PLANNER_EXAMPLES = """\
Question: Which is older, the Eiffel Tower or the Statue of Liberty, and by how many years?
1. search("Eiffel Tower")
2. search("Statue of Liberty")
3. join()
<END_OF_PLAN>
Question: Who runs the company that makes the Walkman?
1. search("Walkman")
Thought: Who runs it needs the company's name, found after step 1.
2. join()
<END_OF_PLAN>
"""

EXAMPLE_NOTE = "The examples below illustrate the format; their tools may differ from yours.\n"
GENERATED_NOTE = "The example below shows the format with your actions; its values are made up.\n"
MIXED_NOTE = (
    "The examples below illustrate the format; the last one uses your actions with "
    "made-up values.\n"
)
VARIED_NOTE = (
    "The examples below illustrate the format; the last ones use your actions with "
    "made-up values.\n"
)
#: The tool the built-in examples call: they are shown only to runs that have it.
EXAMPLE_TOOL = "search"
#: Which few-shot plans a prompt shows when none are given (see :class:`PlannerInput`).
ExampleSource = Literal["own", "mixed", "builtin", "varied"]

COMPUTE_RULE = (
    "\n- A question that compares or combines numbers (how much more, older, longer, "
    "total, difference, ratio) needs an action that computes it from the results, "
    "such as `{call}`."
)

REPLAN_NOTE = """\
The plan above was not enough. Write a NEW plan that only adds what is missing. \
Number its actions from {next_id}; you may use $N to refer to the results above \
instead of running those actions again.
"""


def compute_rule(tools: Sequence[BaseTool]) -> str:
    """The rule that comparisons compute, shown when a tool computes expressions."""
    name = compute_tool(tools)
    return COMPUTE_RULE.format(call=f'{name}("$1 - $2")') if name else ""


def render_actions(tools: Sequence[BaseTool]) -> str:
    """``1. name(sig): description`` lines for the planner."""
    return "\n".join(f"{i}. {_tools.action_line(t)}" for i, t in enumerate(tools, 1))


@dataclass(frozen=True)
class PlannerInput:
    """The LLMCompiler planner prompt for one round.

    Attributes:
        context: The round's question, tools and settings.
        examples: Few-shot plans; None for generated ones (see :meth:`system`).
        constrained_examples: What a constrained prompt shows when `examples` is None.
    """

    context: PlannerContext
    examples: str | None = None
    constrained_examples: ExampleSource = "varied"

    def system(self) -> str:
        """The instructions, the tool list and the examples."""
        tools = self.context.tools
        text = prompting.preamble(self.context.prompt.system_prompt) + PLANNER_INSTRUCTIONS.format(
            n_actions=len(tools) + 1,
            actions=render_actions(tools),
            join_number=len(tools) + 1,
            end=END_OF_PLAN,
            compute=compute_rule(tools),
        )
        examples, note = self.examples, ""
        if examples is None:
            examples, note = self.default_examples()
        text += "\n" + note if examples and note else ""
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def default_examples(self) -> tuple[str, str]:
        """The few-shot plans when none are given, and the note that introduces them.

        Small models copy examples, so unconstrained prompts never show a tool the run
        lacks: the built-in examples (``search``) only to runs that have it, else a plan
        generated from the run's own tools. Under a grammar the model cannot call a
        missing tool; there `constrained_examples` chooses: ``"own"`` (generated only),
        ``"builtin"`` (realistic questions, foreign tools), ``"varied"`` (the built-in
        ones, then several generated ones of different shapes, see
        :func:`~llm_compiler.dialects.llmcompiler.examples.varied_examples`, on the same
        condition as ``"mixed"``) or ``"mixed"`` (the built-in
        ones, then a generated one if it can show a result of one tool feeding another,
        which needs declared return types: tools from JSON schemas keep the built-in
        examples, which did better on BFCL than any with made-up values). Measured on the
        embedded model: see the documentation's "Evaluation" page (``docs/evaluation.md``).
        """
        tools = self.context.tools
        names = {t.metadata.get_name() for t in tools}
        source: ExampleSource = "builtin" if EXAMPLE_TOOL in names else "own"
        if self.context.constrained and source == "own":
            source = self.constrained_examples
        own = ""
        if source != "builtin":
            own = own_tools_example(tools, chained_only=source in ("mixed", "varied"))
        if source == "builtin" or not own:
            return PLANNER_EXAMPLES, EXAMPLE_NOTE
        if source == "varied":
            return PLANNER_EXAMPLES + varied_examples(tools, compute_tool(tools)), VARIED_NOTE
        if source == "mixed":
            return PLANNER_EXAMPLES + own, MIXED_NOTE
        return own, GENERATED_NOTE

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
