"""The engine runs exactly the calls the model wrote: the aids for small models narrow
what a value may be, never add a call, require one or merge two; identical calls merge
only where the result cache would serve the second (``pure``, or ``idempotent`` that
opted in), every other line is a task."""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.plan_lines import PlanParser
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.engine.cache import MemoryCache
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools.adapt import to_tool
from llm_compiler.tools.policy import ToolPolicy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dialects"))
from gbnf_check import accepts  # noqa: E402

FINISH = "Thought: done.\nAction: Finish(done)"
POLICIES = {
    "pure": ToolPolicy(side_effect="pure"),
    "pure_off": ToolPolicy(side_effect="pure", cache=False),
    "idem": ToolPolicy(side_effect="idempotent"),
    "idem_on": ToolPolicy(side_effect="idempotent", cache=True),
    "amo": ToolPolicy(side_effect="at_most_once"),
}
SERVED = {"pure", "idem_on"}  # the policies whose repeated call the result cache serves


def plan(*lines: str) -> str:
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
    return f"{body}{len(lines) + 1}. join()\n{END_OF_PLAN}"


class Calls:
    """Tools of one text argument that count their calls."""

    def __init__(self) -> None:
        self.made: Counter[tuple[str, str]] = Counter()

    def tool(self, name: str) -> Any:
        async def call(who: str) -> str:
            self.made[(name, who)] += 1
            await asyncio.sleep(0)
            return f"{name} done for {who}"

        call.__name__ = name
        call.__doc__ = f"{name.replace('_', ' ').capitalize()} for a person."
        return call


def workflow(tools: list[Any], reply: str, **options: Any) -> LLMCompilerWorkflow:
    """A constrained run of the default dialect (every aid on), its plan scripted."""
    return LLMCompilerWorkflow(
        tools=tools,
        llm=ScriptedLLM([reply, FINISH], chat=False),
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        max_replans=0,
        result_cache=MemoryCache(),
        timeout=30,
        **options,
    )


async def test_a_name_the_question_excludes_gets_no_call():
    calls = Calls()
    wf = workflow([calls.tool("refund")], plan('refund("Alice")'))
    output = await wf.run(user_msg="Refund the order of Alice, not the order of Bob.")
    assert calls.made == {("refund", "Alice"): 1}
    assert [t.args for t in output.summary.tasks] == [{"who": "Alice"}]


def test_a_tool_the_question_names_is_allowed_never_required():
    def order_status(order_id: int) -> str:
        """The status of an order."""
        return "shipped"

    def cancel_order(order_id: int) -> str:
        """Cancel an order."""
        return "cancelled"

    tools = [to_tool(order_status), to_tool(cancel_order)]
    question = "What is the status of order 42? Do not cancel it."
    prompt = PromptContext(question, tools=tools, constrained=True, chat=False)
    context = PlannerContext(prompt=prompt, tools=tools, constrained=True)
    grammar = str(LLMCompilerDialect().planner_request(context).extras["grammar"])
    assert accepts(grammar, plan("order_status(42)"))
    assert accepts(grammar, plan("order_status(42)", "cancel_order(42)"))  # allowed, not forced


async def test_a_call_written_twice_runs_twice_unless_the_cache_would_serve_it():
    calls = Calls()
    names = {kind: f"{kind}_task" for kind in POLICIES}
    lines = [f'{name}("Bob")' for name in names.values() for _ in range(2)]
    policies = {name: POLICIES[kind] for kind, name in names.items()}
    wf = workflow([calls.tool(n) for n in names.values()], plan(*lines), tool_policies=policies)
    output = await wf.run(user_msg="Send two reminders to Bob.")
    expected = {(name, "Bob"): 1 if kind in SERVED else 2 for kind, name in names.items()}
    assert calls.made == expected
    assert len(output.summary.tasks) == 2 * len(names) - len(SERVED)  # merged: no task


async def test_with_the_result_cache_off_a_pure_call_written_twice_runs_twice():
    calls = Calls()
    wf = workflow(
        [calls.tool("lookup")],
        plan('lookup("Bob")', 'lookup("Bob")'),
        tool_policies={"lookup": POLICIES["pure"]},
        cache_results=False,
    )
    await wf.run(user_msg="Look up Bob twice.")
    assert calls.made == {("lookup", "Bob"): 2}


def test_a_merged_line_s_reference_names_the_first_call():
    parser = PlanParser(merged={"lookup"})
    tasks = parser.feed('1. lookup("Bob")\n2. lookup("Bob")\n3. greet($2)\n4. join()\n')
    assert [(t.id, t.tool, t.args) for t in tasks] == [
        (1, "lookup", ["Bob"]),
        (3, "greet", [{"$ref": 1}]),
    ]
    each = PlanParser().feed('1. send("Bob")\n2. send("Bob")\n3. join()\n')
    assert [t.id for t in each] == [1, 2]


# ---------------------------------------------------------------- the property

_TOOLS = ("t0", "t1", "t2")
_NAMES = ("Alice", "Bob", "Carol")
_QUESTIONS = (
    "Do it for {0}, not for {1}.",
    "Do it for {0} and for {1}, but not for {2}.",
    "Never for {1}; only for {0}.",
    "Do it for {0} twice, and do not do it for {2}.",
)


@given(
    st.fixed_dictionaries({t: st.sampled_from(sorted(POLICIES)) for t in _TOOLS}),
    st.lists(
        st.tuples(st.sampled_from(_TOOLS), st.sampled_from(_NAMES), st.booleans()),
        min_size=1,
        max_size=6,
    ),
    st.sampled_from(_QUESTIONS),
    st.permutations(_NAMES),
)
def test_property_the_engine_runs_exactly_the_written_calls(
    kinds: dict[str, str],
    lines_written: list[tuple[str, str, bool]],
    question: str,
    names: list[str],
) -> None:
    """Any plan (a call by position or by keyword), any policies, any negation in the
    question: each written call runs once per line, but a call the result cache would
    serve, which runs once; nothing else runs."""
    calls = Calls()
    written = [(tool, who) for tool, who, _ in lines_written]
    lines = [
        f'{tool}(who="{who}")' if by_keyword else f'{tool}("{who}")'
        for tool, who, by_keyword in lines_written
    ]
    policies = {t: POLICIES[k] for t, k in kinds.items()}
    wf = workflow([calls.tool(t) for t in _TOOLS], plan(*lines), tool_policies=policies)

    async def run() -> None:
        await wf.run(user_msg=question.format(*names))

    asyncio.run(run())
    expected = {call: 1 if kinds[call[0]] in SERVED else n for call, n in Counter(written).items()}
    assert calls.made == expected


# ---------------------------------------------------------------- one switch


async def test_value_aids_off_leave_the_grammar_only_the_form_and_the_types():
    def flight_price(city: str) -> float:
        """The price of a return flight to a city, in US dollars."""
        return 180.0

    grammars = []
    for aids in (True, False):
        llm = ScriptedLLM([plan('flight_price("Rome")'), FINISH], chat=False)
        wf = LLMCompilerWorkflow(
            tools=[flight_price], llm=llm, constrained=True, value_aids=aids, timeout=30
        )
        await wf.run(user_msg="How much is a flight to Rome?")
        grammars.append(llm.calls[0].kwargs["extra_body"]["grammar"])
    aided, free = grammars
    assert accepts(aided, plan('flight_price("Rome")'))
    assert not accepts(aided, plan('flight_price("Paris")'))  # not a span of the question
    assert accepts(free, plan('flight_price("Paris")'))
