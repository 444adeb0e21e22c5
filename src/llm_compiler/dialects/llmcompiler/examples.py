"""Few-shot plans made from the run's own tools, so a model sees its tools used.

Values are invented from each parameter's schema: an allowed value for enums, a
plausible one for common parameter names (``city`` -> ``"Paris"``, ``path`` ->
``"notes.txt"``), a neutral one by type otherwise. The example's question names the
values its plan uses, which teaches small models to copy values from the question.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools.spec import Param, ToolSpec, tool_spec

#: Plausible values by a word of the parameter's name (first match wins).
_NAMED: tuple[tuple[frozenset[str], tuple[Any, Any]], ...] = tuple(
    (frozenset(words.split()), values)
    for words, values in (
        ("city town location place destination origin", ("Paris", "Rome")),
        ("country nation", ("France", "Japan")),
        ("date day start end birthday", ("2024-03-01", "2024-03-15")),
        ("time hour", ("09:00", "17:30")),
        ("path file filename document", ("notes.txt", "report.txt")),
        ("dir directory folder", ("docs", "photos")),
        ("url link website", ("https://example.com/a", "https://example.com/b")),
        ("email address", ("ada@example.com", "alan@example.com")),
        ("language lang", ("French", "German")),
        ("currency", ("EUR", "USD")),
        ("symbol ticker stock company", ("ACME", "Globex")),
        ("unit units", ("km", "miles")),
        ("expression formula equation", ("2 + 3", "10 / 4")),
        ("query topic term keyword subject question title", ("Eiffel Tower", "Statue of Liberty")),
        ("artist band singer", ("Nina Simone", "Miles Davis")),
        ("name person user author", ("Ada Lovelace", "Alan Turing")),
        ("text content message body", ("Hello world", "Good morning")),
    )
)
_BY_TYPE: dict[str, tuple[Any, Any]] = {
    "string": ("first", "second"),
    "integer": (3, 7),
    "number": (12.5, 30.0),
    "boolean": (True, False),
}
_WORD = re.compile(r"[a-z]+")


def sample_value(param: Param, which: int) -> Any:
    """A made-up value for `param` (``which`` is 0 or 1: two different ones)."""
    return _sample(param.name, param.schema, which)


def _sample(name: str, schema: Mapping[str, Any], which: int) -> Any:
    if schema.get("enum"):
        values = list(schema["enum"])
        return values[min(which, len(values) - 1)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        schema = next((o for o in options if o.get("type") != "null"), options[0])
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "array":
        return [_sample(name, schema.get("items", {}), which)]
    if kind == "object":
        props = schema.get("properties", {})
        required = schema.get("required", ())
        return {k: _sample(k, v, which) for k, v in props.items() if k in required}
    if kind in (None, "string"):
        words = set(_WORD.findall(name.lower()))
        named = next((v for keys, v in _NAMED if keys & words), None)
        if named is not None:
            return named[which]
    return _BY_TYPE.get(str(kind), _BY_TYPE["string"])[which]


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
    """``name(key=value, ...)`` with made-up values (`ref` for the first one, if given)."""
    required = [p for p in spec.params if p.required] or list(spec.params[:1])
    parts, values = [], []
    for i, p in enumerate(required):
        if i == 0 and ref is not None:
            parts.append(f"{p.name}=${ref}")
            continue
        value = sample_value(p, which)
        values.append(value)
        parts.append(f"{p.name}={literal(value)}")
    return f"{spec.name}({', '.join(parts)})", values


def _readable(name: str) -> str:
    return " ".join(_WORD.findall(re.sub(r"([a-z])([A-Z])", r"\1 \2", name).lower()))


def own_tools_example(tools: Sequence[BaseTool]) -> str:
    """A plan with the run's tools: the first one called twice in parallel, the next one
    or two once each, the second on the first call's result (``$1``).

    One example of this shape did best on the own-tools eval; three of different shapes
    (parallel, chain, single call) did worse: the small model copied the last one.
    """
    specs = _ordered([tool_spec(t) for t in tools])
    if not specs:
        return ""
    first, rest = specs[0], specs[1:3]
    lines, said = [], []
    for which in (0, 1):
        line, values = _call(first, which)
        lines.append(line)
        said.append(_words(values))
    phrases = [f"{_readable(first.name)} for {' and '.join(said)}"]
    for i, spec in enumerate(rest):
        line, values = _call(spec, 0, 1 if i == 0 else None)
        lines.append(line)
        phrases.append(" ".join([_readable(spec.name), _words(values)]).strip())
    body = "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))
    question = ", then ".join(phrases)
    question = question[:1].upper() + question[1:]
    return f"Question: {question}.\n{body}\n{len(lines) + 1}. join()\n{END_OF_PLAN}\n"


def _words(values: Sequence[Any]) -> str:
    """Values as a question would say them: ``Paris, 3``."""
    return ", ".join(v if isinstance(v, str) else literal(v) for v in values)


def _ordered(specs: list[ToolSpec]) -> list[ToolSpec]:
    """Tools that can be written as calls; first a lookup-like one (a text parameter),
    since a tool of numbers more often works on a lookup's result."""
    usable = [s for s in specs if s.call_form and s.params]
    texty = [s for s in usable if s.params[0].schema.get("type") in (None, "string")]
    return texty[:1] + [s for s in usable if s not in texty[:1]]
