"""Which saved prompt state the embedded server restores and which it keeps (no model)."""

from __future__ import annotations

from llm_compiler.models.prompt_states import PromptStates, Timings, common_prefix

PLANNER = list(range(100))
JOINER = [1000 + i for i in range(80)]


def test_common_prefix_counts_the_leading_tokens_shared():
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([1, 2], [1, 2]) == 2


def test_the_state_sharing_the_longest_prefix_is_found():
    states = PromptStates()
    states.save(PLANNER + [7, 7], "planner", 10)
    states.save(JOINER + [8], "joiner", 10)
    assert states.best(PLANNER + [9]) == (100, states.states[-1])
    assert states.states[-1].data == "planner"  # found: now the most recently used
    assert states.best(JOINER)[1].data == "joiner"
    assert states.best([5000]) == (0, None)


def test_the_same_prompt_with_another_question_replaces_its_state_others_stay():
    states = PromptStates()
    states.save(PLANNER + [1, 1], "question 1", 10)
    states.save(JOINER, "joiner", 10)
    states.save(PLANNER + [2, 2, 2], "question 2", 10)
    assert [s.data for s in states.states] == ["joiner", "question 2"]
    # another tool set shares only the instructions' first tokens: both are kept
    states.save(PLANNER[:20] + [3] * 80, "other tools", 10)
    assert len(states.states) == 3


def test_the_least_recently_used_states_go_past_the_count_or_the_bytes():
    states = PromptStates(capacity=2, max_bytes=100)
    for i in range(3):
        states.save([i] * 10, i, 10)
    assert [s.data for s in states.states] == [1, 2]
    states.save([7] * 10, 7, 95)  # over the bytes with the others: they go
    assert [s.data for s in states.states] == [7]
    states.save([8] * 10, 8, 500)  # a state larger than the bound is still the last one
    assert [s.data for s in states.states] == [8]


def test_timings_are_json_ready():
    timings = Timings(prompt_tokens=600, prompt_n=12, prompt_ms=123.4567)
    assert timings.as_dict()["prompt_ms"] == 123.46
    assert timings.as_dict()["prompt_n"] == 12
