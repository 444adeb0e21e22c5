"""Few-shot plans made from the run's own tools, so a model sees its tools used.

Examples show shapes, not values: each value is one the tool declares (an enum's, a
``Literal``'s, an ``examples`` entry of its JSON schema) or a placeholder made from the
parameter's own name (``city 1``, ``city 2``) or type (``3``, ``7``). Under constrained
decoding the plan grammar bars writing any of them unless the question does. The
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

_WORD = re.compile(r"[a-z]+")
_JSON_TYPES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean",
                                list: "array", tuple: "array", dict: "object"}  # fmt: skip
#: Placeholder numbers by type; a call's later numbers take later ones, so ranges run
#: forward (``min=3, max=7``).
_BY_TYPE: dict[str, tuple[Any, ...]] = {"integer": (3, 7, 12, 20),
                                        "number": (12.5, 30.0, 45.0, 60.0)}  # fmt: skip


def sample_value(param: Param, which: int, offset: int = 0) -> Any:
    """A value for `param` in the `which`-th example call (0 or 1: two different ones):
    a declared one, else a placeholder (see the module docstring). `offset`: how many
    earlier parameters of the call declare the same values or type, so a pair
    (``from_currency``/``to_currency``, ``min``/``max``) takes two different ones."""
    return _sample(param.name, param.schema, which, offset)


def _sample(name: str, schema: Mapping[str, Any], which: int, offset: int = 0) -> Any:
    declared = schema.get("enum") or schema.get("examples")
    if isinstance(declared, list) and declared:
        return declared[min(which + offset, len(declared) - 1)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        schema = next((o for o in options if o.get("type") != "null"), options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        return which == 0
    if kind == "array":
        return [_sample(name, schema.get("items", {}), which)]
    if kind == "object":
        props = schema.get("properties", {})
        required = schema.get("required", ())
        return {k: _sample(k, v, which) for k, v in props.items() if k in required}
    if kind in _BY_TYPE:
        return _BY_TYPE[kind][min(which + offset, len(_BY_TYPE[kind]) - 1)]
    return f"{' '.join(_WORD.findall(name.lower())) or 'value'} {which + 1}"


def _kind(schema: Mapping[str, Any]) -> str:
    """What makes two parameters take values from one list: their declared values, or
    their type."""
    declared = schema.get("enum") or schema.get("examples")
    return repr(declared) if declared else str(schema.get("type"))


def literal(value: Any) -> str:
    """A value as the plan grammar writes it (double-quoted strings, Python words)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def _call(spec: ToolSpec, which: int, ref: int | None = None) -> tuple[str, list[Any]]:
    """``name(key=value, ...)`` with example values (`ref` for the first one, if given)."""
    required = [p for p in spec.params if p.required] or list(spec.params[:1])
    parts: list[str] = []
    values: list[Any] = []
    kinds: list[str] = []
    for i, p in enumerate(required):
        if i == 0 and ref is not None:
            parts.append(f"{p.name}=${ref}")
            continue
        kind = _kind(p.schema)
        value = sample_value(p, which, kinds.count(kind))
        kinds.append(kind)
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


def own_tools_example(tools: Sequence[BaseTool], chained_only: bool = False) -> str:
    """A plan with the run's tools: one called twice in parallel, then one or two others
    once each, the first of them on the first call's result (``$1``) where the types fit.
    Empty if no tool can be shown (see the module docstring), or if `chained_only` and no
    tool fits another.

    One example of this shape did best on the own-tools eval; three of different shapes
    (parallel, chain, single call) did worse: the small model copied the last one.
    """
    shown = [(t, s) for t in tools if (s := tool_spec(t)).call_form and s.params]
    plain = [s for _, s in shown]
    chain = next(
        ((a, b) for t, a in shown for _, b in shown if b is not a and _fits(_returns(t), b)),
        None,
    )
    if chain is None and (chained_only or not plain):
        return ""
    first, rest = chain if chain else (_ordered(plain)[0], None)
    others = [s for s in _ordered(plain) if s is not first and s is not rest]
    calls: list[tuple[ToolSpec, int, int | None]] = [(first, 0, None), (first, 1, None)]
    calls += [(rest, 0, 1)] if rest else []
    calls += [(s, 0, None) for s in others[: 3 - len(calls) + 1]]
    return _plan(calls)


def varied_examples(tools: Sequence[BaseTool], compute: str | None = None) -> str:
    """Plans of different shapes with the run's tools, so a plan is not a copy of one:
    a tool called on two values in parallel; the same, with the first result feeding
    another tool (where the declared types fit); with a calculator (`compute`) and a tool that
    declares a number, a comparison of two of its results; then one call of a tool the
    others did not show. Empty if no tool can be shown."""
    shown = [(t, s) for t in tools if (s := tool_spec(t)).call_form and s.params]
    plain = [s for _, s in shown if s.name != compute]
    if not plain:
        return ""
    chain = next(
        (
            (a, b)
            for t, a in shown
            for _, b in shown
            if a in plain and b is not a and b.name != compute and _fits(_returns(t), b)
        ),
        None,
    )
    first = chain[0] if chain else _ordered(plain)[0]
    out = _plan([(first, 0, None), (first, 1, None)])
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
        out += _plan([(single, 0, None)])
    return out


def _chain(first: ToolSpec, then: ToolSpec) -> str:
    """Two calls of one tool, and another tool on the first one's result: asked as users
    ask it, the second tool's values said after the first's ("Stock price for ACME and
    Globex; convert currency of the one for ACME in USD."), ``$1`` in its plan."""
    a, other, b = _call(first, 0), _call(first, 1), _call(then, 0, 1)
    question = f"{_readable(first.name)} for {_words(a[1])} and {_words(other[1])}; "
    question += f"{_readable(then.name)} of the one for {_words(a[1])}"
    question += f" in {_words(b[1])}" if b[1] else ""
    body = f"1. {a[0]}\n2. {other[0]}\n3. {b[0]}\n"
    return f"Question: {question[:1].upper()}{question[1:]}.\n{body}4. join()\n{END_OF_PLAN}\n"


def _compare(spec: ToolSpec, calculator: ToolSpec) -> str:
    """How much more one value's result is than another's: two calls, then the
    calculator on their results."""
    a, b = _call(spec, 0), _call(spec, 1)
    expression = calculator.params[0].name
    lines = [a[0], b[0], f'{calculator.name}({expression}="$1 - $2")']
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
    question = (
        f"How much more is the {_readable(spec.name)} of {_words(a[1])} than of {_words(b[1])}?"
    )
    return f"Question: {question}\n{body}4. join()\n{END_OF_PLAN}\n"


def _plan(calls: Sequence[tuple[ToolSpec, int, int | None]]) -> str:
    """One example: a question naming the values, the numbered calls, join()."""
    lines, said = [], []
    for spec, which, ref in calls:
        call = _call(spec, which, ref)
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
