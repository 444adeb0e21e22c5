"""BFCL's AST check for the ``parallel`` categories (Python), written from its rules.

A call is correct for an expected answer when it names the expected function, gives every
required parameter, gives no parameter the answer does not list, and each value has the
documented type and is among the allowed values (strings compared case-insensitively and
without spaces or ``,./-_*^``; ``""`` among the allowed values means "may be omitted").
Ints are accepted for floats; a value of the type of the allowed values is accepted even
if the doc says otherwise (BFCL's "variable" rule), and then compared as is.

An item is correct when the model made exactly as many calls as expected and they can be
paired one to one with the expected calls, in any order. (BFCL pairs them greedily, in
answer order; a perfect pairing found here can differ from BFCL only when one call fits
two expected answers, which its data avoids.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Call = tuple[str, dict[str, Any]]
Answer = Mapping[str, Mapping[str, list[Any]]]

_PY_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "array": list,
    "tuple": list,
    "dict": dict,
    "object": dict,
    "any": str,  # BFCL's own choice: an `any` value is checked as text
}
_NESTED = ("array", "tuple")
_STRIP = re.compile(r"[ ,./\-_*^]")


@dataclass
class ItemCheck:
    """The verdict on one item."""

    correct: bool
    calls_correct: int
    """Expected calls matched by a distinct model call."""
    expected: int
    errors: list[str] = field(default_factory=list)


def standardize(text: str) -> str:
    """BFCL's string normalization: no spaces or ``,./-_*^``, lower case, ``'`` as ``"``."""
    return _STRIP.sub("", text).lower().replace("'", '"')


def _first_type(allowed: Sequence[Any]) -> type | None:
    return next((type(a) for a in allowed if a != ""), None)


def _type_check(
    value: Any, allowed: Sequence[Any], expected: type, nested: type | None
) -> tuple[bool, bool]:
    """Whether `value` has the documented type, and whether it counts as a "variable".

    A value of the allowed values' type passes as a variable when the documented type
    (or an element's type) does not fit; a variable is compared exactly.
    """
    first = _first_type(allowed)
    variable = first is not None and first is not expected
    if type(value) is expected:
        if nested is None or not isinstance(value, list):
            return True, variable
        for option in allowed:
            if not isinstance(option, list) or all(
                _type_check(v, option, nested, None)[0] for v in value
            ):
                return True, variable
    if first is not None and type(value) is first:
        return True, True
    return False, variable


def _std(value: Any) -> Any:
    return standardize(value) if isinstance(value, str) else value


def _dict_ok(value: Mapping[str, Any], options: Sequence[Any]) -> bool:
    for option in options:
        if option == "" or not isinstance(option, Mapping):
            continue
        if all(
            k in option and _std(v) in [_std(a) for a in option[k]] for k, v in value.items()
        ) and all(k in value or "" in allowed for k, allowed in option.items()):
            return True
    return False


def _list_of_dicts_ok(value: list[Any], options: Sequence[Any]) -> bool:
    return any(
        isinstance(option, list)
        and len(option) == len(value)
        and all(
            isinstance(v, Mapping) and _dict_ok(v, [o]) for v, o in zip(value, option, strict=True)
        )
        for option in options
    )


def _value_ok(value: Any, allowed: Sequence[Any], expected: type, nested: type | None) -> bool:
    if expected is dict and isinstance(value, Mapping):
        return _dict_ok(value, allowed)
    if expected is list and nested is dict and isinstance(value, list):
        return _list_of_dicts_ok(value, allowed)
    if expected is str and isinstance(value, str):
        return standardize(value) in [standardize(a) for a in allowed if isinstance(a, str)]
    if expected is list and isinstance(value, list):
        # BFCL turns the optional marker "" into an empty list here, so [] fits it too.
        options = [
            [_std(x) for x in a] if isinstance(a, list) else []
            for a in allowed
            if a == "" or isinstance(a, list)
        ]
        return [_std(x) for x in value] in options
    return value in allowed


def check_call(doc: Mapping[str, Any], call: Call, answer: Answer) -> str | None:
    """Why `call` does not fit the expected `answer` (``{name: {param: allowed}}``), or None."""
    name, args = call
    expected_name, allowed_by_param = next(iter(answer.items()))
    if name != expected_name:
        return f"called {name!r}, expected {expected_name!r}"
    params = doc.get("parameters", {})
    props: Mapping[str, Any] = params.get("properties", {})
    for param in params.get("required", []):
        if param not in args:
            return f"{name}: missing required parameter {param!r}"
    for param, value in args.items():
        if param not in props or param not in allowed_by_param:
            return f"{name}: unexpected parameter {param!r}"
        allowed = allowed_by_param[param]
        type_name = str(props[param].get("type", "any"))
        expected = _PY_TYPES.get(type_name, str)
        nested = None
        if type_name in _NESTED:
            nested = _PY_TYPES.get(str(props[param].get("items", {}).get("type", "any")), str)
        if type(value) is tuple and type_name == "tuple":
            value = list(value)
        if expected is float and type(value) is int:
            value = float(value)
        type_ok, variable = _type_check(value, allowed, expected, nested)
        if not type_ok:
            return f"{name}: {param}={value!r} is not of type {type_name}"
        # A "variable" (a value typed like the allowed values, not like the doc) is
        # compared exactly; documented types get BFCL's lenient comparisons.
        ok = value in allowed if variable else _value_ok(value, allowed, expected, nested)
        if not ok:
            return f"{name}: {param}={value!r} is not one of {allowed!r}"
    for param, allowed in allowed_by_param.items():
        if param not in args and "" not in allowed:
            return f"{name}: missing parameter {param!r}"
    return None


def check_item(
    functions: Sequence[Mapping[str, Any]], calls: Sequence[Call], answers: Sequence[Answer]
) -> ItemCheck:
    """Check the calls of one item against its expected calls, in any order."""
    docs = {f["name"]: f for f in functions}
    fits: list[list[int]] = []
    errors: list[str] = []
    for answer in answers:
        doc = docs.get(next(iter(answer)), {})
        row = []
        for j, call in enumerate(calls):
            problem = check_call(doc, call, answer)
            if problem is None:
                row.append(j)
            elif len(calls) == len(answers) and call[0] == next(iter(answer)):
                errors.append(problem)
        fits.append(row)
    matched = _max_matching(fits)
    correct = matched == len(answers) == len(calls)
    if len(calls) != len(answers):
        errors.insert(0, f"{len(calls)} call(s), expected {len(answers)}")
    return ItemCheck(correct, matched, len(answers), [] if correct else errors)


def _max_matching(fits: list[list[int]]) -> int:
    """Size of a maximum pairing of answers to calls (augmenting paths; inputs are tiny)."""
    owner: dict[int, int] = {}

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    return sum(assign(i, set()) for i in range(len(fits)))
