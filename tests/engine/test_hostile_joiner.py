"""Items 7, 8, 9: the joiner's reply is read whole, never blank, and on one line too."""

from __future__ import annotations

import pytest

from llm_compiler import LLMCompilerWorkflow, ReplanEvent, RunError
from llm_compiler.testing import ScriptedLLM, run_and_collect

PLAN = '1. search("a")\n2. join()'


async def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


MARKDOWN = "## Result\n\n### Part 1\nThe first part.\n\n### Part 2\nMore (see above)."


@pytest.mark.timeout(20)
@pytest.mark.parametrize("chat", [True, False])
async def test_a_markdown_answer_is_not_cut_at_its_headings(chat):
    llm = ScriptedLLM([PLAN, f"Thought: done.\nAction: Finish({MARKDOWN})"], chat=chat)
    out, _ = await run_and_collect(
        LLMCompilerWorkflow(tools=[search], llm=llm, timeout=15), user_msg="q"
    )
    assert str(out) == MARKDOWN


@pytest.mark.timeout(20)
async def test_a_blank_joiner_reply_is_asked_again_then_replanned():
    llm = ScriptedLLM(
        [
            PLAN,
            "   \n",
            "",
            PLAN.replace("1.", "3.").replace("2.", "4."),
            "Thought: ok.\nAction: Finish(real answer)",
        ]
    )
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, timeout=15)
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "real answer"
    assert len([e for e in events if isinstance(e, ReplanEvent)]) == 1


@pytest.mark.timeout(20)
async def test_a_blank_joiner_reply_on_the_last_round_is_a_run_error_not_an_answer():
    llm = ScriptedLLM([PLAN, "", "Thought:"])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, timeout=15, max_replans=0)
    with pytest.raises(RunError, match="no answer"):
        await wf.run(user_msg="q")


@pytest.mark.timeout(20)
async def test_one_line_thought_and_action_finish_gives_only_the_answer():
    llm = ScriptedLLM([PLAN, "Thought: I have it. Action: Finish(42)"])
    out, _ = await run_and_collect(
        LLMCompilerWorkflow(tools=[search], llm=llm, timeout=15), user_msg="q"
    )
    assert str(out) == "42"


@pytest.mark.timeout(20)
async def test_one_line_replan_is_a_replan_not_the_answer():
    llm = ScriptedLLM(
        [
            PLAN,
            "Thought: not enough. Action: Replan(search b too)",
            '3. search("b")\n4. join()',
            "Thought: ok. Action: Finish(both)",
        ]
    )
    out, events = await run_and_collect(
        LLMCompilerWorkflow(tools=[search], llm=llm, timeout=15), user_msg="q"
    )
    assert str(out) == "both"
    (replan,) = [e for e in events if isinstance(e, ReplanEvent)]
    assert replan.reason == "search b too"
