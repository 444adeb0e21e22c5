"""Runs under constrained decoding with a scripted model: replans of failed lookups,
grounded answer grammars, and the planner's static prompt kept evaluated."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.testing import LLMCall, ScriptedLLM

QUESTION = "Which is longer, the Danube or the Rhine, and by how much?"
MANGLED = '1. search("Dauphin")\n2. search("Reich")\n3. join()\n<END_OF_PLAN>'
COPIED = (
    '4. lookup("Danube", "length_km")\n5. lookup("Rhine", "length_km")\n'
    '6. calculator("$4 - $5")\n7. join()\n<END_OF_PLAN>'
)
ANSWER = " Danube 2850, Rhine 1230.\nAction: Finish(The Danube is 1620 km longer than the Rhine.)"


@pytest.fixture(autouse=True)
def _no_latency(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", 0.0)


def workflow(llm: ScriptedLLM, constrained: bool = True, **dialect: Any) -> LLMCompilerWorkflow:
    """The demo workflow with the grounded text joiner (the written answers these tests
    check; the selected-answer joiner has tests of its own)."""
    dialect.setdefault("joiner", "text")
    return LLMCompilerWorkflow(
        tools=demo_tools.TOOLS,
        llm=llm,
        dialect=LLMCompilerDialect(
            demo_tools.PLANNER_EXAMPLES, demo_tools.JOINER_EXAMPLES, **dialect
        ),
        constrained=constrained,
        max_replans=1,
    )


def grammar(call: LLMCall) -> str:
    return str(call.kwargs.get("extra_body", {}).get("grammar", ""))


async def test_a_round_that_found_nothing_is_planned_again_with_what_failed():
    llm = ScriptedLLM([MANGLED, COPIED, ANSWER], chat=False)
    result = await workflow(llm).run(user_msg=QUESTION)
    assert str(result) == "The Danube is 1620 km longer than the Rhine."
    assert [c.prompt.rstrip().endswith("Thought:") for c in llm.calls] == [False, False, True]
    replan = llm.calls[1].prompt
    assert 'Replan: These actions failed or found nothing: 1. search("Dauphin") gave' in replan
    assert [r.replan_reason is not None for r in result.summary.rounds] == [True, False]
    assert '"Danube"' in grammar(llm.calls[1]) and '"Dauphin"' not in grammar(llm.calls[1])
    # the answer may write the lengths found and their difference, and no other number
    answer_grammar = grammar(llm.calls[2])
    assert '"1620"' in answer_grammar and '"2850"' in answer_grammar
    assert '"4000"' not in answer_grammar


async def test_only_one_replan_is_forced():
    again = '4. search("Dauphin")\n5. join()\n<END_OF_PLAN>'
    giving_up = " Nothing.\nAction: Finish(I could not find the Dauphin.)"
    llm = ScriptedLLM([MANGLED, again, giving_up], chat=False)
    result = await workflow(llm).run(user_msg=QUESTION)
    assert str(result) == "I could not find the Dauphin."
    assert len(llm.calls) == 3  # the second round's failure went to the joiner


async def test_unconstrained_models_leave_the_decision_to_the_joiner():
    finish = " The lookups failed.\nAction: Finish(I could not find either river.)"
    llm = ScriptedLLM([MANGLED, finish], chat=False)
    result = await workflow(llm, constrained=False).run(user_msg=QUESTION)
    assert str(result) == "I could not find either river."
    assert "grammar" not in llm.calls[1].kwargs.get("extra_body", {})


async def test_a_shared_prefix_joiner_prompt_starts_with_the_planner_prompt_static_part():
    found = '1. lookup("Danube", "length_km")\n2. join()\n<END_OF_PLAN>'
    done = " 2850.\nAction: Finish(The Danube is 2850 km long.)"
    llm = ScriptedLLM([found, done, found, done], chat=False)
    wf = workflow(llm, shared_prefix=True)
    await wf.run(user_msg="How long is the Danube?")
    await wf.run(user_msg="How long is the Rhine?")
    planner, joiner, next_planner = (c.prompt for c in llm.calls[:3])
    static = planner[: planner.index("Question: How long is the Danube?")]
    assert len(static) > 1000 and joiner.startswith(static) and next_planner.startswith(static)
    assert "Answer a question from the results" in joiner[len(static) :]
    # by default, the joiner's prompt is its own
    llm = ScriptedLLM([found, done], chat=False)
    await workflow(llm).run(user_msg="How long is the Danube?")
    assert llm.calls[1].prompt.startswith("Answer a question from the results")


class EmbeddedLike(ScriptedLLM):
    """A scripted model that says it is the embedded llama.cpp server."""

    llm_compiler_constrained: ClassVar[bool] = True


async def test_after_an_answer_the_embedded_model_reads_the_planner_prompt_again():
    def reply(call: LLMCall) -> str:
        if call.prompt.endswith("Question:"):
            return " W"
        if call.prompt.rstrip().endswith("Thought:"):
            return " 2850.\nAction: Finish(The Danube is 2850 km long.)"
        return '1. lookup("Danube", "length_km")\n2. join()\n<END_OF_PLAN>'

    llm = EmbeddedLike(reply, chat=False)
    wf = LLMCompilerWorkflow(
        tools=demo_tools.TOOLS,
        llm=llm,
        # a joiner call, which evicts the planner's prompt (a rendered answer may make none)
        dialect=LLMCompilerDialect(
            demo_tools.PLANNER_EXAMPLES, demo_tools.JOINER_EXAMPLES, joiner="text"
        ),
    )
    assert str(await wf.run(user_msg="How long is the Danube?")) == "The Danube is 2850 km long."
    await wf.warmed()
    await wf.run(user_msg="How long is the Rhine?")
    planner, _, warm, next_planner = (c.prompt for c in llm.calls[:4])
    assert warm.endswith("\nQuestion:")
    assert planner.startswith(warm) and next_planner.startswith(warm)
    # a model that is not the embedded one gets no such request
    plain = ScriptedLLM(reply, chat=False)
    wf = LLMCompilerWorkflow(tools=demo_tools.TOOLS, llm=plain, constrained=True)
    await wf.run(user_msg="How long is the Danube?")
    assert not wf._planner._warming and plain.calls
    assert not any(c.prompt.endswith("\nQuestion:") for c in plain.calls)
