"""Few-shot plans made from the run's own tools, so a model sees its tools used.

Values are invented from each parameter's schema: an allowed value for enums, a
plausible one for common parameter names (``city`` -> ``"Paris"``, ``path`` ->
``"notes.txt"``). A tool with a parameter that gets neither is not shown: small models
copy a made-up value such as ``"first"`` or ``12.5`` into their plans (seen on BFCL). The
example's question names the values its plan uses. A second tool is called on the first
one's result (``$1``) only where the first tool declares a return type that fits the
second's parameter: tools from JSON schemas (BFCL, MCP) declare none, and their
questions rarely chain.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.tools import BaseTool, FunctionTool

from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools.spec import Param, ToolSpec, tool_spec

#: Plausible values by a word of the parameter's name (first match wins). Three each: two
#: parallel calls, and the second of a pair (``start``/``end``) one step further.
_NAMED: tuple[tuple[frozenset[str], tuple[Any, Any, Any]], ...] = tuple(
    (frozenset(words.split()), values)
    for words, values in (
        ("city town location place destination origin", ("Paris", "Rome", "Vienna")),
        ("country nation", ("France", "Japan", "Brazil")),
        ("date day start end birthday since until", ("2024-03-01", "2024-03-15", "2024-04-02")),
        ("time hour", ("09:00", "17:30", "21:15")),
        ("path file filename document", ("notes.txt", "report.txt", "summary.txt")),
        ("dir directory folder", ("docs", "photos", "music")),
        ("url link website", ("https://example.com/a", "https://example.com/b",
                              "https://example.com/c")),
        ("email address", ("ada@example.com", "alan@example.com", "grace@example.com")),
        ("language lang", ("French", "German", "Spanish")),
        ("currency", ("EUR", "USD", "JPY")),
        ("days", (3, 7, 14)),
        ("symbol ticker stock company", ("ACME", "Globex", "Initech")),
        ("unit units", ("km", "miles", "m")),
        ("expression formula equation", ("2 + 3", "10 / 4", "7 * 6")),
        ("query topic term keyword subject question title", ("Eiffel Tower", "Statue of Liberty",
                                                             "Great Wall of China")),
        ("artist band singer", ("Nina Simone", "Miles Davis", "Ella Fitzgerald")),
        ("name person user author", ("Ada Lovelace", "Alan Turing", "Grace Hopper")),
        ("text content message body", ("Hello world", "Good morning", "See you soon")),
    )
)  # fmt: skip
#: Words that make a parameter the second of a pair (from/to, start/end, min/max, ...):
#: it gets the next value, so a pair never repeats one value and ranges run forward.
_SECOND_OF_PAIR = frozenset(
    "to end target dest destination max maximum until upper high last stop".split()
)
_WORD = re.compile(r"[a-z]+")
_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                                list: "array", tuple: "array", dict: "object"}  # fmt: skip


#: Values by type, for prompts without a grammar (``lenient``), where any example with the
#: run's own tools beats one with a foreign tool.
_BY_TYPE: dict[str, tuple[Any, Any, Any]] = {"string": ("first", "second", "third"),
                                              "integer": (3, 7, 12),
                                              "number": (12.5, 30.0, 45.0)}  # fmt: skip


class _NoValue(Exception):
    """No plausible value for a parameter: the tool is left out of the examples."""


def sample_value(param: Param, which: int, lenient: bool = False) -> Any:
    """A made-up value for `param` (``which`` is 0 or 1: two different ones).

    The second parameter of a pair (``to``, ``end``, ``max``, ...) gets the value after
    the first's, so ``convert(from_currency="EUR", to_currency="USD")``.

    Raises:
        _NoValue: The parameter has no allowed values and no name we know a value for
            (unless `lenient`: then a value of its type).
    """
    words = set(_WORD.findall(param.name.lower()))
    return _sample(param.name, param.schema, which + bool(words & _SECOND_OF_PAIR), lenient)


#: Parameter names that say nothing of their value: the tool's name may (``company_profile(name)``).
_GENERIC = frozenset("name query id key value input q".split())


def _sample(name: str, schema: Mapping[str, Any], which: int, lenient: bool = False) -> Any:
    if schema.get("enum"):
        values = list(schema["enum"])
        return values[min(which, len(values) - 1)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        schema = next((o for o in options if o.get("type") != "null"), options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return which == 0
    if kind == "array":
        return [_sample(name, schema.get("items", {}), which, lenient)]
    if kind == "object":
        props = schema.get("properties", {})
        required = schema.get("required", ())
        return {k: _sample(k, v, which, lenient) for k, v in props.items() if k in required}
    words = set(_WORD.findall(name.lower()))
    for keys, named in _NAMED:
        value = named[which]
        fits = isinstance(value, str) if kind in (None, "string") else isinstance(value, int)
        if keys & words and fits:
            return value
    if lenient:
        return _BY_TYPE.get(str(kind), _BY_TYPE["string"])[which]
    raise _NoValue(name)


def literal(value: Any) -> str:
    """A value as the plan grammar writes it (double-quoted strings, Python words)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _call(
    spec: ToolSpec, which: int, ref: int | None = None, lenient: bool = False
) -> tuple[str, list[Any]] | None:
    """``name(key=value, ...)`` with made-up values (`ref` for the first one, if given);
    None if a parameter has no plausible value."""
    required = [p for p in spec.params if p.required] or list(spec.params[:1])
    parts, values = [], []
    for i, p in enumerate(required):
        if i == 0 and ref is not None:
            parts.append(f"{p.name}=${ref}")
            continue
        sampled = p
        if p.name.lower() in _GENERIC and p.schema.get("type") in (None, "string"):
            # The tool's words first: company_profile(name) takes a company.
            sampled = Param(f"{spec.name} {p.name}", p.schema, p.required)
        try:
            value = sample_value(sampled, which, lenient)
        except _NoValue:
            return None
        values.append(value)
        parts.append(f"{p.name}={literal(value)}")
    return f"{spec.name}({', '.join(parts)})", values


def _returns(tool: BaseTool) -> str | None:
    """The JSON type of what a Python tool declares it returns (None if unknown)."""
    if not isinstance(tool, FunctionTool):
        return None
    for fn in (tool.async_fn, tool.fn):
        try:
            hint = typing.get_type_hints(fn).get("return")
        except Exception:  # noqa: BLE001 - an unresolvable hint is no hint
            continue
        origin = typing.get_origin(hint) or hint
        if isinstance(origin, type) and origin in _JSON_TYPES:
            return _JSON_TYPES[origin]
    return None


def _fits(returns: str | None, spec: ToolSpec) -> bool:
    """Whether a result of JSON type `returns` can be `spec`'s first required argument."""
    required = [p for p in spec.params if p.required]
    if returns is None or not required:
        return False
    wanted = required[0].schema.get("type")
    return wanted == returns or (wanted == "number" and returns == "integer")


def _readable(name: str) -> str:
    return " ".join(_WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower()))


def own_tools_example(
    tools: Sequence[BaseTool], lenient: bool = False, chained_only: bool = False
) -> str:
    """A plan with the run's tools: one called twice in parallel, then one or two others
    once each, the first of them on the first call's result (``$1``) where the types fit.
    Empty if no tool can be shown (see the module docstring), or if `chained_only` and no
    tool fits another; `lenient` shows every tool, with values by type where no
    plausible one is known.

    One example of this shape did best on the own-tools eval; three of different shapes
    (parallel, chain, single call) did worse: the small model copied the last one.
    """
    shown = [(t, s) for t in tools if (s := tool_spec(t)).call_form and s.params]
    plain = [s for _, s in shown if _call(s, 0, None, lenient) is not None]
    chain = next(
        (
            (a, b)
            for t, a in shown
            for _, b in shown
            if a in plain and b is not a and _fits(_returns(t), b) and _call(b, 0, 1, lenient)
        ),
        None,
    )
    if chain is None and (chained_only or not plain):
        return ""
    first, rest = chain if chain else (_ordered(plain)[0], None)
    others = [s for s in _ordered(plain) if s is not first and s is not rest]
    calls: list[tuple[ToolSpec, int, int | None]] = [(first, 0, None), (first, 1, None)]
    calls += [(rest, 0, 1)] if rest else []
    calls += [(s, 0, None) for s in others[: 3 - len(calls) + 1]]
    return _plan(calls, lenient)


def varied_examples(tools: Sequence[BaseTool], compute: str | None = None) -> str:
    """Plans of different shapes with the run's tools, so a plan is not a copy of one:
    a tool called on two values in parallel; the same, with the first result feeding
    another tool (where the declared types fit); with a calculator (`compute`) and a tool that
    declares a number, a comparison of two of its results; then one call of a tool the
    others did not show. Empty if no tool can be shown."""
    shown = [(t, s) for t in tools if (s := tool_spec(t)).call_form and s.params]
    plain = [s for _, s in shown if _call(s, 0) is not None and s.name != compute]
    if not plain:
        return ""
    chain = next(
        (
            (a, b)
            for t, a in shown
            for _, b in shown
            if a in plain
            and b is not a
            and b.name != compute
            and _fits(_returns(t), b)
            and _call(b, 0, 1)
        ),
        None,
    )
    first = chain[0] if chain else _ordered(plain)[0]
    out = _plan([(first, 0, None), (first, 1, None)], False)
    used = {first.name}
    if chain:
        out += _chain(first, chain[1])
        used.add(chain[1].name)
    numeric = next(
        (s for t, s in shown if s in plain and _returns(t) in ("number", "integer")), None
    )
    calculator = next((s for _, s in shown if s.name == compute), None)
    if numeric is not None and calculator is not None:
        out += _compare(numeric, calculator)
    single = next((s for s in _ordered(plain) if s.name not in used), None)
    if single is not None:
        out += _plan([(single, 0, None)], False)
    return out


def _chain(first: ToolSpec, then: ToolSpec) -> str:
    """Two calls of one tool, and another tool on the first one's result: asked as users
    ask it, the second tool's values said after the first's ("Stock price for ACME and
    Globex; convert currency of the one for ACME in USD."), ``$1`` in its plan."""
    a, other, b = _call(first, 0), _call(first, 1), _call(then, 0, 1)
    assert a is not None and other is not None and b is not None
    question = f"{_readable(first.name)} for {_words(a[1])} and {_words(other[1])}; "
    question += f"{_readable(then.name)} of the one for {_words(a[1])}"
    question += f" in {_words(b[1])}" if b[1] else ""
    body = f"1. {a[0]}\n2. {other[0]}\n3. {b[0]}\n"
    return f"Question: {question[:1].upper()}{question[1:]}.\n{body}4. join()\n{END_OF_PLAN}\n"


def _compare(spec: ToolSpec, calculator: ToolSpec) -> str:
    """How much more one value's result is than another's: two calls, then the
    calculator on their results."""
    a, b = _call(spec, 0), _call(spec, 1)
    assert a is not None and b is not None
    expression = calculator.params[0].name
    lines = [a[0], b[0], f'{calculator.name}({expression}="$1 - $2")']
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
    question = (
        f"How much more is the {_readable(spec.name)} of {_words(a[1])} than of {_words(b[1])}?"
    )
    return f"Question: {question}\n{body}4. join()\n{END_OF_PLAN}\n"


def _plan(calls: Sequence[tuple[ToolSpec, int, int | None]], lenient: bool) -> str:
    """One example: a question naming the values, the numbered calls, join()."""
    lines, said = [], []
    for spec, which, ref in calls:
        call = _call(spec, which, ref, lenient)
        assert call is not None  # only tools with values are planned
        lines.append(call[0])
        said.append((spec.name, _words(call[1])))
    if len(said) == 1:
        phrases = [f"{_readable(said[0][0])} for {said[0][1]}"]
    else:
        phrases = [f"{_readable(said[0][0])} for {said[0][1]} and {said[1][1]}"]
    phrases += [f"{_readable(name)} {words}".strip() for name, words in said[2:]]
    question = ", then ".join(phrases)
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
    return (
        f"Question: {question[:1].upper()}{question[1:]}.\n"
        f"{body}{len(lines) + 1}. join()\n{END_OF_PLAN}\n"
    )


def _words(values: Sequence[Any]) -> str:
    """Values as a question would say them: ``Paris, 3``."""
    return ", ".join(v if isinstance(v, str) else literal(v) for v in values)


def _ordered(specs: list[ToolSpec]) -> list[ToolSpec]:
    """Tools that can be written as calls; first a lookup-like one (a text parameter),
    since a tool of numbers more often works on a lookup's result."""
    usable = [s for s in specs if s.call_form and s.params]
    texty = [s for s in usable if s.params[0].schema.get("type") in (None, "string")]
    return texty[:1] + [s for s in usable if s not in texty[:1]]
