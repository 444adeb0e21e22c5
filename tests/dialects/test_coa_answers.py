"""Chain-of-Abstraction answers are plain words: no ``[FUNC ...]`` markup reaches the user."""

from __future__ import annotations

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects.coa import CoADialect
from llm_compiler.testing import LLMCall, ScriptedLLM


def test_markup_becomes_its_result_or_its_call():
    from llm_compiler.dialects.coa.parser import plain

    assert plain('Mars is [FUNC lookup("Mars", "diameter_km") = 6792.0] km wide.') == (
        "Mars is 6792.0 km wide."
    )
    assert plain('K2 is [FUNC lookup("K2") = y1] m.') == 'K2 is lookup("K2") m.'
    assert plain('[FUNC calculator("2 - 1")] and [FUNC bad]') == 'calculator("2 - 1") and '
    assert plain("brackets [like these] stay") == "brackets [like these] stay"


async def search(query: str) -> str:
    """Look a country up."""
    return {"France": "Capital: Paris.", "Japan": "Capital: Tokyo."}.get(query, "No entry.")


async def test_an_answer_that_copies_the_filled_in_reasoning_has_no_markup():
    def reply(call: LLMCall) -> str:
        if call.prompt.rstrip().endswith("Answer:"):  # the model copies the reasoning
            return (
                ' France: [FUNC search("France") = Capital: Paris.]. '
                'Japan: [FUNC search("Japan") = y2].'
            )
        return ' France: [FUNC search("France") = y1]. Japan: [FUNC search("Japan") = y2].'

    wf = LLMCompilerWorkflow(
        tools=[search], llm=ScriptedLLM(reply, chat=False), dialect=CoADialect()
    )
    answer = str(await wf.run(user_msg="What are the capitals of France and Japan?"))
    assert "[FUNC" not in answer and "Capital: Paris." in answer


async def test_a_reasoning_whose_calls_could_not_be_read_is_not_the_answer():
    def reply(call: LLMCall) -> str:
        if call.prompt.rstrip().endswith("Answer:"):
            return " I could not read the lookup of France."
        return " The capital is [FUNC bad] and [FUNC search(France = y1]"

    wf = LLMCompilerWorkflow(
        tools=[search], llm=ScriptedLLM(reply, chat=False), dialect=CoADialect()
    )
    answer = str(await wf.run(user_msg="What is the capital of France?"))
    assert "[FUNC" not in answer
