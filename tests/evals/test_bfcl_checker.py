"""The BFCL AST checker on hand-made items."""

from __future__ import annotations

from evals.checker import check_call, check_item, standardize

PLAY = {
    "name": "spotify.play",
    "parameters": {
        "type": "dict",
        "properties": {
            "artist": {"type": "string"},
            "duration": {"type": "integer"},
            "shuffle": {"type": "boolean"},
        },
        "required": ["artist", "duration"],
    },
}
AREA = {
    "name": "area.calculate",
    "parameters": {
        "type": "dict",
        "properties": {
            "radius": {"type": "float"},
            "unit": {"type": "string"},
            "sides": {"type": "array", "items": {"type": "integer"}},
            "point": {"type": "tuple", "items": {"type": "float"}},
            "options": {"type": "dict", "properties": {}},
            "shapes": {"type": "array", "items": {"type": "dict"}},
        },
        "required": ["radius"],
    },
}
FUNCTIONS = [PLAY, AREA]
TWO_PLAYS = [
    {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20], "shuffle": ["", False]}},
    {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
]


def test_standardize_ignores_case_spaces_and_punctuation():
    assert standardize("April 1, 2024") == standardize("april 1 2024") == "april12024"
    assert standardize("New-York_City") == "newyorkcity"
    assert standardize("it's") == 'it"s'


def test_parallel_calls_match_in_any_order():
    calls = [
        ("spotify.play", {"artist": "maroon 5", "duration": 15}),
        ("spotify.play", {"artist": "Taylor Swift", "duration": 20}),
    ]
    result = check_item(FUNCTIONS, calls, TWO_PLAYS)
    assert result.correct and result.calls_correct == 2 and result.errors == []


def test_wrong_count_fails_but_counts_matching_calls():
    one = [("spotify.play", {"artist": "Maroon 5", "duration": 15})]
    result = check_item(FUNCTIONS, one, TWO_PLAYS)
    assert not result.correct and result.calls_correct == 1
    assert "1 call(s), expected 2" in result.errors[0]
    same_twice = one * 2
    assert check_item(FUNCTIONS, same_twice, TWO_PLAYS).calls_correct == 1


def test_optional_parameters_may_be_omitted_only_when_marked():
    answer = TWO_PLAYS[0]
    assert (
        check_call(PLAY, ("spotify.play", {"artist": "Taylor Swift", "duration": 20}), answer)
        is None
    )
    assert (
        check_call(
            PLAY,
            ("spotify.play", {"artist": "Taylor Swift", "duration": 20, "shuffle": False}),
            answer,
        )
        is None
    )
    strict = {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20], "shuffle": [True]}}
    problem = check_call(PLAY, ("spotify.play", {"artist": "Taylor Swift", "duration": 20}), strict)
    assert "missing parameter 'shuffle'" in problem


def test_missing_required_unknown_params_and_wrong_function():
    answer = TWO_PLAYS[1]
    assert "missing required parameter 'duration'" in check_call(
        PLAY, ("spotify.play", {"artist": "Maroon 5"}), answer
    )
    assert "unexpected parameter 'volume'" in check_call(
        PLAY, ("spotify.play", {"artist": "Maroon 5", "duration": 15, "volume": 3}), answer
    )
    # A documented parameter the answer does not list is unexpected too.
    assert "unexpected parameter 'shuffle'" in check_call(
        PLAY, ("spotify.play", {"artist": "Maroon 5", "duration": 15, "shuffle": True}), answer
    )
    assert "expected 'spotify.play'" in check_call(PLAY, ("search", {}), answer)


def test_types_are_strict_except_int_for_float():
    answer = {"area.calculate": {"radius": [5.0]}}
    assert check_call(AREA, ("area.calculate", {"radius": 5}), answer) is None
    assert check_call(AREA, ("area.calculate", {"radius": 5.0}), answer) is None
    assert "not of type float" in check_call(AREA, ("area.calculate", {"radius": "5"}), answer)
    assert "not of type integer" in check_call(
        PLAY, ("spotify.play", {"artist": "Maroon 5", "duration": 15.0}), TWO_PLAYS[1]
    )
    assert "not of type integer" in check_call(
        PLAY, ("spotify.play", {"artist": "Maroon 5", "duration": True}), TWO_PLAYS[1]
    )
    # Junk a lenient parser could make of a copied tool list is a wrong value.
    assert check_call(AREA, ("area.calculate", {"radius": "radius: float"}), answer) is not None


def test_variable_values_typed_like_the_answer_are_compared_exactly():
    answer = {"area.calculate": {"radius": ["r"]}}
    assert check_call(AREA, ("area.calculate", {"radius": "r"}), answer) is None
    assert check_call(AREA, ("area.calculate", {"radius": "R"}), answer) is not None


def test_lists_tuples_and_nested_element_types():
    answer = {"area.calculate": {"radius": [1.0], "sides": [[3, 4]], "point": [[1.0, 2.0]]}}
    ok = {"radius": 1.0, "sides": [3, 4], "point": (1.0, 2.0)}
    assert check_call(AREA, ("area.calculate", ok), answer) is None
    assert check_call(AREA, ("area.calculate", {**ok, "sides": [4, 3]}), answer) is not None
    # Wrongly typed elements pass the type check as a "variable", then fail the exact match.
    assert "is not one of" in check_call(
        AREA, ("area.calculate", {**ok, "sides": ["3", "4"]}), answer
    )
    assert "not of type array" in check_call(AREA, ("area.calculate", {**ok, "sides": 3}), answer)
    text_list = {"area.calculate": {"radius": [1.0], "unit": ["Square Meters", "m2"]}}
    assert (
        check_call(AREA, ("area.calculate", {"radius": 1, "unit": "square-meters"}), text_list)
        is None
    )


def test_dicts_and_lists_of_dicts():
    answer = {
        "area.calculate": {
            "radius": [1.0],
            "options": [{"precision": [2], "label": ["Big Circle", ""]}],
            "shapes": [[{"kind": ["circle"]}, {"kind": ["square"]}]],
        }
    }
    base = {"radius": 1.0, "shapes": [{"kind": "Circle"}, {"kind": "square"}]}
    assert (
        check_call(AREA, ("area.calculate", {**base, "options": {"precision": 2}}), answer) is None
    )
    with_label = {**base, "options": {"precision": 2, "label": "big circle"}}
    assert check_call(AREA, ("area.calculate", with_label), answer) is None
    extra_key = {**base, "options": {"precision": 2, "color": "red"}}
    assert check_call(AREA, ("area.calculate", extra_key), answer) is not None
    missing_key = {**base, "options": {"label": "big circle"}}
    assert check_call(AREA, ("area.calculate", missing_key), answer) is not None
    swapped = {
        **base,
        "shapes": [{"kind": "square"}, {"kind": "circle"}],
        "options": {"precision": 2},
    }
    assert check_call(AREA, ("area.calculate", swapped), answer) is not None


def test_a_perfect_pairing_is_found_where_a_greedy_one_would_fail():
    # The first answer fits both calls, the second only the first call.
    answers = [
        {"spotify.play": {"artist": ["A"], "duration": [1], "shuffle": ["", True]}},
        {"spotify.play": {"artist": ["A"], "duration": [1], "shuffle": [True]}},
    ]
    calls = [
        ("spotify.play", {"artist": "A", "duration": 1, "shuffle": True}),
        ("spotify.play", {"artist": "A", "duration": 1}),
    ]
    assert check_item(FUNCTIONS, calls, answers).correct
