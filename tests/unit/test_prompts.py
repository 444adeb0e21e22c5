"""The prompts, pinned."""

from __future__ import annotations

from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool

from llm_compiler import prompts


def search(query: str, k: int = 3) -> str:
    """Search the web."""
    return query


TOOL = FunctionTool.from_defaults(fn=search)


def test_action_lines_show_signature_and_description():
    assert prompts.render_actions([TOOL]) == "1. search(query: str, k: int = 3): Search the web."


def test_planner_system_prompt():
    text = prompts.PlannerInput([TOOL], "q", examples="", system_prompt="Be brief.").system()
    assert text.startswith("Be brief.\n\nGiven a question, write a plan")
    assert "following" not in text
    assert "1. search(query: str, k: int = 3): Search the web.\n2. join(): collects" in text
    assert text.rstrip().endswith("Always end with `join()`, then write <END_OF_PLAN>.")


def test_default_examples_are_marked_as_illustrations():
    text = prompts.PlannerInput([TOOL], "q").system()
    assert prompts.EXAMPLE_NOTE in text and 'search("Eiffel Tower")' in text
    assert prompts.EXAMPLE_NOTE not in prompts.PlannerInput([TOOL], "q", examples="X\n").system()


def test_replan_request_shows_history_and_next_id():
    record = prompts.RoundRecord(
        plan_lines=[('1. search("a")', "A"), ("2. search($9)", "Error: bad ref")],
        errors=["The plan did not end with join()."],
        thought="not enough",
        reason="look up b",
    )
    assert prompts.PlannerInput([TOOL], "q?", rounds=[record], next_id=4).request() == (
        "Question: q?\n"
        '1. search("a")\nObservation: A\n2. search($9)\nObservation: Error: bad ref\n'
        "Plan error: The plan did not end with join().\nThought: not enough\nReplan: look up b\n"
        + prompts.REPLAN_NOTE.format(next_id=4)
    )


def test_completion_prompts_end_where_the_model_continues():
    history = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="yo")]
    plan = prompts.PlannerInput([TOOL], "q?", history, examples="").prompt()
    assert "Conversation so far:\nuser: hi\nassistant: yo\n" in plan
    assert plan.endswith("\nQuestion: q?\n")
    join = prompts.JoinerInput("q?", last_round=True, examples="").prompt()
    assert join.endswith("Question: q?\n\nThought:")
    assert prompts.LAST_ROUND_NOTE.strip() in join


def test_chat_messages_keep_only_the_conversation():
    history = [
        ChatMessage(role="system", content="other agent's system prompt"),
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="tool", content="tool output"),
        ChatMessage(role="assistant", content="yo"),
    ]
    messages = prompts.JoinerInput("q?", history).messages()
    assert [m.role.value for m in messages] == ["system", "user", "assistant", "user"]
    assert prompts.LAST_ROUND_NOTE.strip() not in messages[0].content
