"""The planner's warm-up request after an answer: one token, and only where it helps."""

from __future__ import annotations

from typing import ClassVar

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.testing import LLMCall, ScriptedLLM


class GrammarServer(ScriptedLLM):
    """A scripted model that says its server takes grammars (a llama.cpp server)."""

    llm_compiler_constrained: ClassVar[bool] = True


class Embedded(GrammarServer):
    """The same, keeping recent prompts evaluated itself (the embedded model's server)."""

    llm_compiler_keeps_prompts: ClassVar[bool] = True


def reply(call: LLMCall) -> str:
    if call.prompt.endswith("Question:"):
        return " W"
    if call.prompt.rstrip().endswith("Thought:"):
        return " 2850.\nAction: Finish(The Danube is 2850 km long.)"
    return '1. lookup("Danube", "length_km")\n2. join()\n<END_OF_PLAN>'


def workflow(llm: ScriptedLLM) -> LLMCompilerWorkflow:
    dialect = LLMCompilerDialect(
        demo_tools.PLANNER_EXAMPLES, demo_tools.JOINER_EXAMPLES, joiner="text"
    )
    return LLMCompilerWorkflow(tools=demo_tools.TOOLS, llm=llm, dialect=dialect)


async def test_the_warm_up_asks_the_server_for_one_token_in_the_body():
    # An OpenAI client's own max_tokens (512 for the embedded model) overrides the
    # keyword: a warm-up that wrote 512 tokens held the next question's planner back.
    llm = GrammarServer(reply, chat=False)
    wf = workflow(llm)
    await wf.run(user_msg="How long is the Danube?")
    await wf.warmed()
    warm = [c for c in llm.calls if c.prompt.endswith("\nQuestion:")]
    assert len(warm) == 1
    assert warm[0].kwargs["extra_body"] == {"max_tokens": 1}


async def test_a_model_that_keeps_its_prompts_gets_no_warm_up():
    llm = Embedded(reply, chat=False)
    wf = workflow(llm)
    await wf.run(user_msg="How long is the Danube?")
    await wf.warmed()
    await wf.run(user_msg="How long is the Rhine?")
    assert not any(c.prompt.endswith("\nQuestion:") for c in llm.calls)
    assert [c.role for c in llm.calls] == ["planner", "joiner", "planner", "joiner"]
