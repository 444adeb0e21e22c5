from __future__ import annotations

import pytest

from llm_compiler.dialects.arguments import parse_arguments
from llm_compiler.dialects.llmcompiler import PlanParser, parse_task_line
from llm_compiler.dialects.thought_action import parse_joiner_output
from llm_compiler.plan import ref


def parse_plan(text: str, *, chunk: int = 1, **kwargs) -> PlanParser:
    parser = PlanParser(**kwargs)
    for i in range(0, len(text), chunk):
        parser.feed(text[i : i + chunk])
    parser.finish()
    return parser


# ----------------------------------------------------------------------------- real plans


def test_every_original_plan_parses_streamed_char_by_char(original_plans):
    for block in original_plans:
        body = "\n".join(
            line for line in block.splitlines() if line[:1].isdigit() or line.startswith("Thought")
        )
        parser = parse_plan(body)
        assert parser.tasks, block
        assert parser.joined, block
        assert parser.errors == []
        assert all(t.error is None for t in parser.tasks), [t.error for t in parser.tasks]
        # ids strictly increase and join comes last
        ids = [t.id for t in parser.tasks]
        assert ids == sorted(ids) and parser.join_id == ids[-1] + 1


def test_original_plan_with_unquoted_args_missing_parens_and_refs(original_plans):
    cheetah = next(b for b in original_plans if "cheetah" in b)
    parser = parse_plan(cheetah)
    tasks = {t.id: t for t in parser.tasks}
    assert tasks[2].args == ["cheetah max speed in km/h if 1.3 times slower?", [ref(1)]]
    assert tasks[2].deps == [1]  # the line has no closing parenthesis
    assert tasks[7].deps == [2, 4, 6]
    movies = next(b for b in original_plans if "In Cold Blood" in b)
    tasks = {t.id: t for t in parse_plan(movies).tasks}
    assert tasks[7].args == ["In Cold Blood"]
    assert tasks[8].args == ["Rosetta"]


def test_question_lines_before_the_plan_are_ignored_and_a_second_question_stops(
    original_plans,
):
    parser = parse_plan(original_plans[0] + "\nQuestion: another\n1. search('x')\n")
    assert [t.args for t in parser.tasks] == [["Arthur's Magazine"], ["First for Women (magazine)"]]


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("text", "args", "kwargs"),
    [
        ('"a", 2, 3.5, True, None', ["a", 2, 3.5, True, None], {}),
        ("x='a', k=-3", [], {"x": "a", "k": -3}),
        ("[1, 2], {'a': [3]}", [[1, 2], {"a": [3]}], {}),
        ("In Cold Blood", ["In Cold Blood"], {}),
        ("Star Wars: Episode IV", ["Star Wars: Episode IV"], {}),
        ("Rosetta", ["Rosetta"], {}),
        ("", [], {}),
        ('"a" + "b"', ["ab"], {}),
        ("'it''s'", ["its"], {}),
    ],
)
def test_literal_arguments(text, args, kwargs):
    assert parse_arguments(text, own_id=5, earlier=[1, 2]) == (args, kwargs)


def test_references_keep_type_or_interpolate():
    args, kwargs = parse_arguments(
        '$1, "${2}", "ratio of $1 to ${2}", [$1, "$2"], q=$2', own_id=3, earlier=[1, 2]
    )
    assert args[0] == ref(1) and args[1] == ref(2)
    assert args[2] == {"$concat": ["ratio of ", ref(1), " to ", ref(2)]}
    assert args[3] == [ref(1), ref(2)]
    assert kwargs == {"q": ref(2)}


def test_dollar_amounts_are_not_references():
    args, _ = parse_arguments('"costs $10 or $1 billion, $1.5 or $1,000"', own_id=2, earlier=[1])
    # $1 exists (task 1) but "$1.5"/"$1,000" are numbers; $10 has no task.
    value = args[0]
    assert value["$concat"] == ["costs $10 or ", ref(1), " billion, $1.5 or $1,000"]


def test_dollar_ten_never_matches_task_one():
    args, _ = parse_arguments('"$10 apples"', own_id=3, earlier=[1, 2])
    assert args == ["$10 apples"]
    args, _ = parse_arguments('"$10"', own_id=11, earlier=[1, 10])
    assert args == [ref(10)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("$3", "Task 3 references itself"),
        ('"$3 and more"', "Task 3 references itself"),
        ("$7", "references task 7, which is not an earlier task"),
        ('"${7}"', "references task 7, which is not an earlier task"),
        ("*xs", "Star arguments"),
    ],
)
def test_bad_references_are_line_errors(text, message):
    task = parse_task_line(3, f"tool({text})", earlier=[1, 2])
    assert task.error is not None and message in task.error


def test_expressions_are_passed_as_text_never_evaluated():
    args, _ = parse_arguments(
        "max($1, $2) / 2, __import__('os').system('x')", own_id=3, earlier=[1, 2]
    )
    assert args[0] == {"$concat": ["max(", ref(1), ", ", ref(2), ") / 2"]}
    assert args[1] == "__import__('os').system('x')"


def test_json_form():
    task = parse_task_line(2, '{"search": {"query": "$1 facts", "k": 3}}', earlier=[1])
    assert task.tool == "search" and task.deps == [1]
    assert task.kwargs == {"query": {"$concat": [ref(1), " facts"]}, "k": 3}
    task = parse_task_line(2, '{"tool": "math", "args": ["$1"]}', earlier=[1])
    assert (task.tool, task.args) == ("math", [ref(1)])
    assert parse_task_line(2, '{"search": ', earlier=[]).error.startswith(
        "Task 2 is not valid JSON"
    )


def test_unparseable_line_is_an_error_not_a_crash():
    task = parse_task_line(4, "please search for cats", earlier=[])
    assert task.error and "tool(arguments)" in task.error


# ----------------------------------------------------------------------------- plan stream


def test_tasks_come_out_as_soon_as_their_line_is_complete():
    parser = PlanParser()
    assert parser.feed('1. search("a (b)"') == []
    assert [t.id for t in parser.feed(")")] == [1]  # at its ")", before the newline
    assert parser.feed("  # trailing comment\n2. sea") == []
    assert [t.id for t in parser.feed('rch("b")\n')] == [2]
    parser.feed("3. join()")
    assert parser.done and parser.join_id == 3
    assert parser.feed("4. search('ignored')\n") == []


def test_end_of_plan_and_thoughts():
    parser = parse_plan('Thought: look both up\n1. s("a")\nThought: x\n2. s("b")<END_OF_PLAN>junk')
    assert [t.thought for t in parser.tasks] == ["look both up", "x"]
    assert parser.errors == ["The plan did not end with join()."]


def test_plan_level_errors():
    assert parse_plan("").errors == ["The plan has no tasks.", "The plan did not end with join()."]
    parser = parse_plan('1. s("a")\n1. s("b")\n2. join()')
    assert "reuses task id 1" in parser.errors[0] and len(parser.tasks) == 1
    parser = parse_plan('1. s("a")\n2. s("b")\n3. s("c")\n4. join()', max_tasks=2)
    assert [t.id for t in parser.tasks] == [1, 2]
    assert "more than 2 tasks" in parser.errors[0]


def test_replan_continues_numbering_and_may_reference_earlier_rounds():
    parser = parse_plan(
        "5. s($2)\n6. s($5, $4)\n7. join()", known_ids=[1, 2], taken_ids=[3], round=1
    )
    t5, t6 = parser.tasks
    assert t5.deps == [2] and t5.round == 1 and t5.error is None
    assert "task 4, which is not an earlier task" in t6.error
    parser = parse_plan('3. s("x")\n4. s("y")\n4. join()', known_ids=[1, 2], taken_ids=[3])
    assert [t.id for t in parser.tasks] == [4, 5]  # restarted at a taken id: renumbered
    assert "reuses task id 5" in parser.errors[0]


def test_a_replan_that_restarts_numbering_is_renumbered_with_its_references():
    plan = '1. s("a")\n2. s($1, $2)\n3. s($1, "${2} and $10")\n4. join()'
    parser = parse_plan(plan, known_ids=[1, 2], taken_ids=[3], round=1)
    t4, t5, t6 = parser.tasks
    assert (t4.id, t5.id, t6.id, parser.join_id) == (4, 5, 6, 7)
    assert t5.error == "Task 5 references itself ($2)."
    assert t6.deps == [4, 5]  # $1 and $2 are the new plan's own lines 1 and 2
    assert t6.args == [ref(4), {"$concat": [ref(5), " and $10"]}]
    assert t6.text == "6. s($4, '${5} and $10')"
    parser = parse_plan("1. s($2)\n2. join()", known_ids=[1, 2], taken_ids=[3], round=1)
    assert parser.tasks[0].id == 4 and parser.tasks[0].deps == [2]  # no new line 2: old task


def test_markdown_and_prose_around_the_plan():
    parser = parse_plan('Here is the plan:\n```\n1. s("a")\n**2.** s("b")\n3. join()\n```')
    assert [t.id for t in parser.tasks] == [1, 2] and parser.joined
    assert all(t.error is None for t in parser.tasks)
    parser = parse_plan('- 1. s("a")\n- 2) s("b")\n3: join()')
    assert [t.id for t in parser.tasks] == [1, 2] and parser.joined


# ----------------------------------------------------------------------------- joiner


@pytest.mark.parametrize(
    ("text", "action", "content"),
    [
        ("Thought: ok\nAction: Finish(The Matrix (1999))", "finish", "The Matrix (1999)"),
        ("Action: Finish(The Matrix (1999)", "finish", "The Matrix (1999)"),
        ("Action: Finish(1) apples 2) pears)", "finish", "1) apples 2) pears"),
        ("Action: Finish(line one\nline two\n- three)", "finish", "line one\nline two\n- three"),
        (
            "Action: Finish(We do not need to Replan(anything).)",
            "finish",
            "We do not need to Replan(anything).",
        ),
        ("Thought: missing\nAction: Replan(search for X)", "replan", "search for X"),
        ("Just the answer, no format.", "finish", "Just the answer, no format."),
        ("Thought: x\nAction: Finish(42)\nThought: extra\nAction: Replan(y)", "finish", "42"),
        ("action: finish: 42", "finish", "42"),
    ],
)
def test_joiner_output(text, action, content):
    decision = parse_joiner_output(text)
    assert (decision.action, decision.content) == (action, content)


def test_joiner_thought_is_kept():
    d = parse_joiner_output("Thought: the two dates differ\nAction: Replan(need 3)")
    assert d.thought == "the two dates differ"
    assert parse_joiner_output("Thought: only thinking").content == "only thinking"
