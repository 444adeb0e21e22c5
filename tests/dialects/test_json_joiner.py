"""The JSON joiner: its schema, its GBNF, examples converted from Thought/Action, parsing."""

from __future__ import annotations

import json

import pytest
from gbnf_check import accepts

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.json_joiner import (
    JsonJoinerInput,
    joiner_schema,
    json_examples,
    json_joiner_grammar,
    parse_json_decision,
)
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord

REPLY = '{"verdict": "answer", "evidence": ["328"], "answer": "Mont Blanc is 328 m higher."}'
ROUNDS = [
    RoundRecord(
        tasks=[
            TaskRecord(1, "lookup", '1. lookup("Mont Blanc", "height_m")', "4806.0"),
            TaskRecord(2, "lookup", '2. lookup("Matterhorn", "height_m")', "4478.0"),
            TaskRecord(3, "calculator", '3. calculator("$1 - $2")', "328.0"),
        ]
    )
]
QUESTION = "How much higher is Mont Blanc than the Matterhorn?"


def test_a_reply_is_parsed_into_a_decision_with_its_evidence():
    decision = parse_json_decision(REPLY)
    assert (decision.action, decision.content, decision.thought) == (
        "finish",
        "Mont Blanc is 328 m higher.",
        "Evidence: 328",
    )
    replan = parse_json_decision('{"verdict": "replan", "evidence": [], "answer": "Find K2."}')
    assert (replan.action, replan.content, replan.thought) == ("replan", "Find K2.", None)


@pytest.mark.parametrize(
    "text",
    [
        "Thought: done\nAction: Finish(42)",  # not JSON: read as Thought/Action
        '{"verdict": "maybe", "answer": "x"}',  # no known verdict
        '{"verdict": "answer", "answer": "x"',  # cut off
    ],
)
def test_other_replies_fall_back_to_the_thought_action_reader(text):
    decision = parse_json_decision(text)
    assert decision.action == "finish"
    assert decision.content in ("42", text)


def test_a_reply_without_an_answer_is_a_failed_join():
    assert parse_json_decision('{"verdict": "answer", "evidence": [], "answer": 7}').content == ""


def test_the_grammar_writes_the_schemas_object_with_grounded_evidence():
    grammar = json_joiner_grammar(evidence=["328", "4806"])
    assert accepts(grammar, REPLY)
    assert accepts(grammar, REPLY.replace('["328"]', '["328", "4806"]'))
    assert accepts(grammar, REPLY.replace('["328"]', "[]"))
    assert not accepts(grammar, REPLY.replace('"328"', '"329"'))  # not observed
    assert not accepts(grammar, REPLY.replace("answer", "finish", 1))
    assert not accepts(
        json_joiner_grammar(allow_replan=False), REPLY.replace("answer", "replan", 1)
    )
    assert accepts(json_joiner_grammar(), REPLY.replace('"328"', '"anything \\" quoted"'))
    assert not accepts(json_joiner_grammar(evidence=[]), REPLY)  # nothing found, no evidence
    for reply in ('{"verdict": "answer", "evidence": [], "answer": ""}', REPLY + "\n"):
        assert not accepts(grammar, reply)  # an empty answer; text after the object


def test_the_schema_is_strict_and_lists_the_evidence_allowed():
    schema = joiner_schema(allow_replan=False, evidence=["328", "328", "Mont Blanc"])
    assert schema["required"] == ["verdict", "evidence", "answer"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["verdict"]["enum"] == ["answer"]
    assert schema["properties"]["evidence"]["items"]["enum"] == ["328", "Mont Blanc"]
    assert joiner_schema(evidence=[])["properties"]["evidence"]["maxItems"] == 0
    assert joiner_schema()["properties"]["evidence"]["items"] == {"type": "string"}


def test_thought_action_examples_become_json_replies_quoting_their_evidence():
    converted = json_examples(demo_tools.JOINER_EXAMPLES)
    replies = [json.loads(line) for line in converted.splitlines() if line.startswith("{")]
    assert replies[0] == {
        "verdict": "answer",
        "evidence": ["328"],
        "answer": "Mont Blanc is 328 m higher than the Matterhorn.",
    }
    assert replies[1]["evidence"] == ["Italy", "Rome", "Spain", "Madrid"]
    assert "Observation: 4806.0" in converted and "Thought:" not in converted


def test_a_constrained_completion_request_carries_the_grammar_of_the_values_found():
    context = PromptContext(
        QUESTION, rounds=ROUNDS, chat=False, constrained=True, tools=demo_tools.TOOLS
    )
    request = JsonJoinerInput(context, demo_tools.JOINER_EXAMPLES).llm_request()
    assert request.prompt is not None
    assert request.prompt.endswith(f"Answer the question: {QUESTION}\n")
    grammar = request.extras["grammar"]
    assert accepts(grammar, REPLY)  # evidence is a value found
    assert accepts(grammar, REPLY.replace('"328"', '"4806"'))
    assert not accepts(grammar, REPLY.replace('"328"', '"4000"'))


def test_a_chat_request_carries_a_json_schema_response_format():
    context = PromptContext(QUESTION, rounds=ROUNDS, constrained=True, last_round=True)
    request = JsonJoinerInput(context).llm_request()
    fmt = request.extras["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["properties"]["verdict"]["enum"] == ["answer"]
    assert request.messages is not None and "grammar" not in request.extras
    plain = JsonJoinerInput(PromptContext(QUESTION, rounds=ROUNDS)).llm_request()
    assert plain.extras == {}


def test_the_dialect_uses_the_json_joiner_when_asked():
    context = PromptContext(QUESTION, rounds=ROUNDS, chat=False, constrained=True)
    dialect = LLMCompilerDialect(joiner="json")
    assert "grammar" in dialect.joiner_request(context).extras
    assert '"verdict"' in (dialect.joiner_request(context).prompt or "")
    assert dialect.parse_decision(REPLY).content == "Mont Blanc is 328 m higher."
    assert LLMCompilerDialect().parse_decision(REPLY).content == REPLY  # text joiner: as is
