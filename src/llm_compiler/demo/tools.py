"""Offline tools for the demo: a safe calculator and a small encyclopedia.

Nothing here touches the network. ``search`` and ``lookup`` await a short delay (like a
network lookup would) so the demo shows independent tasks running in parallel; set
``DEMO_TOOL_LATENCY=0`` to turn it off. A name they do not know raises
:class:`~llm_compiler.tools.NotFound`: the engine reads that as "found nothing".
"""

from __future__ import annotations

import ast
import asyncio
import difflib
import json
import math
import operator
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, Literal

from llm_compiler.tools.policy import with_policy
from llm_compiler.tools.results import NotFound
from llm_compiler.tools.spec import Expression

ENCYCLOPEDIA_PATH = Path(__file__).with_name("encyclopedia.json")
LATENCY = float(os.environ.get("DEMO_TOOL_LATENCY", "0.3"))

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "min": min,
    "max": max,
    "round": round,
    "log": math.log,
    "exp": math.exp,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 1000


def calculator(expression: Expression) -> float:
    """Evaluate an arithmetic expression and return the number.

    Supports numbers, + - * / // % ** and parentheses, pi, e and the functions
    sqrt, abs, min, max, round, log, exp. No units, words or thousands separators.
    Example: calculator("(8849 - 8611) / 2")
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"Not an arithmetic expression: {expression!r}.") from exc
    try:
        value = float(_evaluate(tree.body))
    except ZeroDivisionError as exc:
        raise ValueError(f"Division by zero in {expression!r}.") from exc
    # 15 significant digits, all a float holds exactly: 229.5 - 181.2 is 48.3, not
    # 48.30000000000001.
    return float(f"{value:.15g}")


def _evaluate(node: ast.expr) -> Any:
    """Evaluate one node of an arithmetic expression; reject anything else."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, int | float):
            raise ValueError(f"Only numbers are allowed, not {node.value!r}.")
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise ValueError(f"Exponent {right} is too large (at most {_MAX_EXPONENT}).")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call):
        return _call(node)
    raise ValueError(f"Unsupported syntax in expression: {ast.unparse(node)!r}.")


def _call(node: ast.Call) -> Any:
    name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
    if name not in _FUNCTIONS or node.keywords:
        raise ValueError(f"Unknown function {name!r}; use one of {', '.join(_FUNCTIONS)}.")
    return _FUNCTIONS[name](*(_evaluate(arg) for arg in node.args))


# --------------------------------------------------------------------------- encyclopedia


@cache
def _entries() -> dict[str, dict[str, Any]]:
    """Every entry by normalized title and alias."""
    entries = json.loads(ENCYCLOPEDIA_PATH.read_text(encoding="utf-8"))
    index: dict[str, dict[str, Any]] = {}
    for entry in entries:
        for key in [entry["title"], *entry.get("aliases", [])]:
            index[_normalize(key)] = entry
    return index


def _normalize(text: str) -> str:
    text = re.sub(r"[^\w\s]", " ", text.lower())
    return " ".join(w for w in text.split() if w not in ("the", "of", "a"))


def find_entry(query: str) -> dict[str, Any] | None:
    """The entry a query names: exact title or alias, a name inside it, or a close spelling."""
    index, wanted = _entries(), _normalize(query)
    if wanted in index:
        return index[wanted]
    padded = f" {wanted} "
    inside = [key for key in index if f" {key} " in padded]
    if inside:
        return index[max(inside, key=len)]
    close = difflib.get_close_matches(wanted, list(index), n=1, cutoff=0.8)
    return index[close[0]] if close else None


def contents() -> str:
    """What the encyclopedia knows: its entries by kind, with the fields ``lookup`` reads."""
    entries = json.loads(ENCYCLOPEDIA_PATH.read_text(encoding="utf-8"))
    kinds: dict[str, list[dict[str, Any]]] = {}
    for entry in entries:
        kinds.setdefault(entry["kind"], []).append(entry)
    lines = [
        f"The demo encyclopedia has {len(entries)} entries; search(name) returns an entry's "
        "text (countries: capital, population, area), lookup(name, field) one of the fields "
        "in parentheses:"
    ]
    for kind, group in kinds.items():
        fields = sorted({f for e in group for f in e.get("facts", {})})
        titles = ", ".join(e["title"] for e in group)
        lines.append(f"- {kind} ({', '.join(fields)}): {titles}")
    return "\n".join(lines)


async def search(query: str) -> str:
    """Look up a country, mountain, river, planet or famous person in the encyclopedia.

    Returns a short factual text. Use one name per call.
    Example: search("Mount Everest")
    """
    await asyncio.sleep(LATENCY)
    entry = find_entry(query)
    if entry is None:
        raise NotFound(f"No entry for {query!r}. Try a single name such as 'France' or 'Nile'.")
    return f"{entry['title']}: {entry['text']}"


#: The numbers ``lookup`` reads, declared so that a constrained plan can only name one.
Field = Literal[
    "population", "area_km2", "height_m", "length_km", "diameter_km", "distance_au",
    "orbital_period_days", "birth_year", "death_year",
]  # fmt: skip


async def lookup(name: str, field: Field) -> float:
    """Return one number about a country, mountain, river, planet or person.

    Fields: population, area_km2 (countries); height_m (mountains); length_km (rivers);
    diameter_km, distance_au, orbital_period_days (planets); birth_year, death_year (people).
    Example: lookup("K2", "height_m")
    """
    await asyncio.sleep(LATENCY)
    entry = find_entry(name)
    if entry is None:
        raise NotFound(f"No entry for {name!r}.")
    facts = entry.get("facts", {})
    if field not in facts:
        known = ", ".join(facts) or "none"
        raise NotFound(f"{entry['title']} has no field {field!r}; known fields: {known}.")
    return float(facts[field])


TOOLS = [with_policy(fn, side_effect="pure") for fn in (search, lookup, calculator)]
"""The demo's tools: lookups and arithmetic, ``pure`` (retried, and run again after a
crash, as nothing outside changes)."""


# Few-shot examples in the demo's domain. A small base model copies the shape of its
# examples closely: with these it writes one line per entity and chains numbers into
# calculator("$1 - $2").
PLANNER_EXAMPLES = """\
Question: How much higher is Mont Blanc than the Matterhorn?
1. lookup("Mont Blanc", "height_m")
2. lookup("Matterhorn", "height_m")
3. calculator("$1 - $2")
4. join()
<END_OF_PLAN>
Question: How much longer is the Yangtze than the Seine?
1. lookup("Yangtze", "length_km")
2. lookup("Seine", "length_km")
3. calculator("$1 - $2")
4. join()
<END_OF_PLAN>
Question: What are the capitals of Italy and Spain?
1. search("Italy")
2. search("Spain")
3. join()
<END_OF_PLAN>
"""

JOINER_EXAMPLES = """\
Question: How much higher is Mont Blanc than the Matterhorn?
1. lookup("Mont Blanc", "height_m")
Observation: 4806.0
2. lookup("Matterhorn", "height_m")
Observation: 4478.0
3. calculator("$1 - $2")
Observation: 328.0
Thought: Mont Blanc is 4806 m, the Matterhorn 4478 m; the difference is 328 m.
Action: Finish(Mont Blanc is 328 m higher than the Matterhorn.)
<END_OF_RESPONSE>
Question: What are the capitals of Italy and Spain?
1. search("Italy")
Observation: Italy: Country in Southern Europe. Capital: Rome. Population: about 59 million.
2. search("Spain")
Observation: Spain: Country in Southwestern Europe. Capital: Madrid. Population: about 48 million.
Thought: The capital of Italy is Rome. The capital of Spain is Madrid.
Action: Finish(The capital of Italy is Rome and the capital of Spain is Madrid.)
<END_OF_RESPONSE>
"""

# The same two examples as a Chain-of-Abstraction reasoning, and the answer written from
# it once the results are filled in.
COA_REASONING_EXAMPLES = """\
Question: How much higher is Mont Blanc than the Matterhorn?
Reasoning: Mont Blanc is [FUNC lookup("Mont Blanc", "height_m") = y1] m high and the \
Matterhorn [FUNC lookup("Matterhorn", "height_m") = y2] m, so Mont Blanc is \
[FUNC calculator("y1 - y2") = y3] m higher.
Question: What are the capitals of Italy and Spain?
Reasoning: Italy: [FUNC search("Italy") = y1]. Spain: [FUNC search("Spain") = y2].
"""

COA_ANSWER_EXAMPLES = """\
Question: How much higher is Mont Blanc than the Matterhorn?
Reasoning: Mont Blanc is [FUNC lookup("Mont Blanc", "height_m") = 4806.0] m high and the \
Matterhorn [FUNC lookup("Matterhorn", "height_m") = 4478.0] m, so Mont Blanc is \
[FUNC calculator("4806.0 - 4478.0") = 328.0] m higher.
Answer: Mont Blanc is 328 m higher than the Matterhorn.
Question: What are the capitals of Italy and Spain?
Reasoning: Italy: [FUNC search("Italy") = Italy: Country in Southern Europe. Capital: Rome.]. \
Spain: [FUNC search("Spain") = Spain: Country in Southwestern Europe. Capital: Madrid.].
Answer: The capital of Italy is Rome and the capital of Spain is Madrid.
"""
