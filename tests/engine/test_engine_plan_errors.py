"""Plan errors carry the kind they were made with, on the wire too; no kind is guessed
from a message's text."""

from __future__ import annotations

from llama_index.core.agent.workflow import AgentStream
from workflows.context.serializers import JsonSerializer

from llm_compiler import LLMCompilerWorkflow, PlanEvent
from llm_compiler.dialects.coa.parser import CoAParser
from llm_compiler.plan import PlanError, PlanTask, error_kind
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: ok.\nAction: Finish(done)"


def search(query: str) -> str:
    """Look a topic up."""
    return query


async def final_plan(plan: str, **options) -> PlanEvent:
    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([plan, FINISH]), **options)
    handler = wf.run(user_msg="q")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    await handler
    return next(e for e in events if isinstance(e, PlanEvent) and e.complete)


async def test_bounds_reached_are_too_large_whatever_their_wording():
    long_line = 'search("' + "x" * 300 + '")'
    plan = f'1. {long_line}\n2. search([[[["deep"]]]])\n3. search("ok")\n4. join()'
    final = await final_plan(plan, max_line_chars=200, max_arg_depth=2)
    assert "line is longer than 200 characters" in final.tasks[0].error
    assert "nested deeper than 2" in final.tasks[1].error
    assert [t.error_kind for t in final.tasks] == ["too_large", "too_large", None]
    cut = await final_plan('1. search("a")\n2. search("' + "y" * 400 + '")', max_plan_chars=100)
    kinds = dict(zip(cut.errors, cut.error_kinds, strict=True))
    assert kinds["The plan is longer than 100 characters; the rest was not read."] == "too_large"


async def test_kinds_cross_the_wire_as_made():
    final = await final_plan('1. nosuch("a")\n1. search("b")\n2. join()')
    serializer = JsonSerializer()
    back = serializer.deserialize(serializer.serialize(final))
    assert serializer.serialize(back) == serializer.serialize(final)  # nothing added on the way
    assert back.error_kinds == final.error_kinds == ["reused_id"]
    assert [t.error_kind for t in back.tasks] == ["unknown_tool"]


def test_a_message_given_as_plain_text_has_no_guessed_kind():
    """A dialect that gives plain text gets ``other``, even for a sentence like ours."""
    task = PlanTask(id=1, tool="x", error="Unknown tool 'x'. Available: y.")
    assert task.error_kind == "other" and error_kind("The plan has no tasks.") == "other"
    event = PlanEvent(round=0, errors=["The plan did not end with join()."])
    assert event.error_kinds == ["other"]
    made = PlanEvent(round=0, errors=[PlanError("Anything at all.", "no_join")])
    assert made.error_kinds == ["no_join"]


def test_chain_of_abstraction_names_no_call_defines_are_bad_references():
    parser = CoAParser()
    tasks = parser.feed("It is [FUNC search(y9) = y1].") + parser.finish()
    assert tasks[0].error is not None and "no earlier call defines" in tasks[0].error
    assert tasks[0].error_kind == "bad_reference"
