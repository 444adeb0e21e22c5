"""The prompts, pinned."""

from __future__ import annotations

from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool

from llm_compiler.dialects import LLMCompilerDialect, PlannerContext
from llm_compiler.dialects.llmcompiler import prompts
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.dialects.thought_action import LAST_ROUND_NOTE, JoinerInput


def search(query: str, k: int = 3) -> str:
    """Search the web."""
    return query


TOOL = FunctionTool.from_defaults(fn=search)


def planner(question="q", examples=None, **prompt) -> prompts.PlannerInput:
    ctx = PlannerContext(prompt=PromptContext(question=question, **prompt), tools=[TOOL])
    return prompts.PlannerInput(ctx, examples)


def test_action_lines_show_signature_and_description():
    assert prompts.render_actions([TOOL]) == "1. search(query: str, k: int = 3): Search the web."


def test_planner_system_prompt():
    text = planner(examples="", system_prompt="Be brief.").system()
    assert text.startswith("Be brief.\n\nGiven a question, write a plan")
    assert "1. search(query: str, k: int = 3): Search the web.\n2. join(): collects" in text
    assert text.rstrip().endswith("Always end with `join()`, then write <END_OF_PLAN>.")


def test_default_examples_are_marked_as_illustrations():
    text = planner().system()
    assert prompts.EXAMPLE_NOTE in text and 'search("Eiffel Tower")' in text
    assert "###" not in text  # a separator the joiner could mistake for an answer's end
    assert prompts.EXAMPLE_NOTE not in planner(examples="X\n").system()


def test_replan_request_shows_history_and_next_id():
    record = RoundRecord(
        tasks=[
            TaskRecord(1, "search", '1. search("a")', "A"),
            TaskRecord(2, "search", "2. search($9)", "Error: bad ref", is_error=True),
        ],
        errors=["The plan did not end with join()."],
        thought="not enough",
        reason="look up b",
    )
    ctx = PlannerContext(
        prompt=PromptContext(question="q?", rounds=[record]), tools=[TOOL], next_id=4
    )
    assert prompts.PlannerInput(ctx).request() == (
        "Question: q?\n"
        '1. search("a")\nObservation: A\n2. search($9)\nObservation: Error: bad ref\n'
        "Plan error: The plan did not end with join().\nThought: not enough\nReplan: look up b\n"
        + prompts.REPLAN_NOTE.format(next_id=4)
    )


def test_completion_prompts_end_where_the_model_continues():
    history = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="yo")]
    plan = planner("q?", examples="", history=history, chat=False).prompt()
    assert "Conversation so far:\nuser: hi\nassistant: yo\n" in plan
    assert plan.endswith("\nQuestion: q?\n")
    request = JoinerInput(PromptContext("q?", last_round=True, chat=False), "").llm_request()
    assert request.prompt is not None and request.prompt.endswith(
        "Question: q?\n\nAnswer the question: q?\nThought:"
    )
    assert request.prefill == "Thought:" and LAST_ROUND_NOTE.strip() in request.prompt


def test_chat_messages_keep_only_the_conversation():
    history = [
        ChatMessage(role="system", content="other agent's system prompt"),
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="tool", content="tool output"),
        ChatMessage(role="assistant", content="yo"),
    ]
    request = LLMCompilerDialect().joiner_request(PromptContext("q?", history))
    assert request.messages is not None
    assert [m.role.value for m in request.messages] == ["system", "user", "assistant", "user"]
    assert LAST_ROUND_NOTE.strip() not in (request.messages[0].content or "")


def test_examples_never_teach_a_tool_the_run_does_not_have():
    def play(artist: str, minutes: int) -> str:
        """Play an artist."""
        return artist

    ctx = PlannerContext(prompt=PromptContext("q"), tools=[FunctionTool.from_defaults(fn=play)])
    text = prompts.PlannerInput(ctx).system()
    assert "search(" not in text and prompts.EXAMPLE_NOTE not in text
    assert prompts.GENERATED_NOTE in text
    assert (
        "Question: Play for Nina Simone, 3 and Miles Davis, 7.\n"
        '1. play(artist="Nina Simone", minutes=3)\n2. play(artist="Miles Davis", minutes=7)\n'
        "3. join()" in text
    )
