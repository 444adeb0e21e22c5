"""The plan cache: a question of a shape already answered gets that answer's plan, its
literals replaced by the new question's, instead of a planner call.

After a run that answered in its first round with every task done, its plan is kept as a
template: each argument value the question states exactly once (a name, a number) becomes
a slot, at its place in the question and in the plan's text; every other word of the
question must then match exactly. A new question fills the slots from its own words at
the same places, so ``5 minus 3`` and ``3 minus 5`` fill ``a`` and ``b`` by position and
never swap; a question whose other words differ does not match. A slot takes as many
words as the value it replaced, and a number slot only a number. Templates are kept per
tool set (the tools' names, descriptions and schemas, their policies and the dialect):
a changed tool or policy finds none. A replan always plans afresh, and the joiner judges
the results as for any plan.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler.engine.cache import fingerprint
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import PlanEvent
from llm_compiler.plan import PlanTask
from llm_compiler.tools import ToolSet

#: Templates one cache keeps (least recently used out first).
TEMPLATES_KEPT = 1024
_MARK = "\x00{}\x00"
_WORD = r"[^\s\"'\\]+"


@dataclass(frozen=True)
class Slot:
    """A literal of the plan stated in the question: its kind and how many words it spans."""

    kind: str  # "str", "int" or "float"
    words: int
    quote: str  # the quote around it in the plan text ('' for a number)

    def pattern(self) -> str:
        if self.kind == "int":
            return r"(-?\d+)"
        if self.kind == "float":
            return r"(-?\d+(?:\.\d+)?)"
        return "(" + r"\s".join([_WORD] * self.words) + ")"

    def render(self, text: str) -> str:
        """`text` (the new question's words) as the plan writes this literal."""
        if self.kind == "int":
            return str(int(text))
        if self.kind == "float":
            return repr(float(text))
        if self.quote == "'":
            return repr(text)
        return json.dumps(text, ensure_ascii=False)


@dataclass(frozen=True)
class Template:
    """A question's shape and the plan text to fill."""

    pattern: re.Pattern[str]
    plan: str
    slots: tuple[Slot, ...]

    def fill(self, question: str) -> str | None:
        """The plan for `question`, or None if it is not of this shape."""
        found = self.pattern.fullmatch(normal(question))
        if found is None:
            return None
        plan = self.plan
        for i, (slot, text) in enumerate(zip(self.slots, found.groups(), strict=True)):
            plan = plan.replace(_MARK.format(i), slot.render(text))
        return plan


def normal(question: str) -> str:
    """`question` with runs of whitespace as one space, stripped."""
    return " ".join(question.split())


def literals(tasks: Iterable[PlanTask]) -> list[Any]:
    """The distinct scalar argument values (strings, numbers) of `tasks`, in order."""
    out: list[Any] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if "$ref" not in value:
                for v in value.values():
                    walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, str | int | float) and not isinstance(value, bool):
            if value not in out and str(value).strip():
                out.append(value)

    for task in tasks:
        walk(task.kwargs)
    return out


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(rf"(?<![\w.]){re.escape(needle)}(?![\w]|\.\d)", text)]


def _plan_spans(plan: str, value: Any) -> tuple[str, list[tuple[int, int]]]:
    """Where the plan text writes `value`: (its quote, spans of the whole literal)."""
    if isinstance(value, str):
        for quote in ('"', "'"):
            token = quote + value + quote
            spans = [m.span() for m in re.finditer(re.escape(token), plan)]
            if spans:
                return quote, spans
        return "", []
    return "", _spans(plan, repr(value) if isinstance(value, float) else str(value))


def learn(question: str, plan: str, tasks: Iterable[PlanTask]) -> Template | None:
    """The template of `question` answered by `plan` (its text) and `tasks`, or None
    when a literal is stated twice in the question or cannot be found in the plan."""
    question = normal(question)
    marks: list[tuple[int, int, int]] = []  # question spans, slot index
    edits: list[tuple[int, int, int]] = []  # plan spans, slot index
    slots: list[Slot] = []
    for value in literals(tasks):
        text = repr(value) if isinstance(value, float) else str(value)
        where = _spans(question, text)
        if not where:
            continue  # a constant of the plan: kept as written
        quote, in_plan = _plan_spans(plan, value)
        if len(where) > 1 or not in_plan:
            return None
        kind = "str" if isinstance(value, str) else type(value).__name__
        slots.append(Slot(kind, len(text.split()), quote))
        marks.append((*where[0], len(slots) - 1))
        edits += [(a, b, len(slots) - 1) for a, b in in_plan]
    if not slots or _overlap(marks) or _overlap(edits):
        return None
    pattern, order = _pattern(question, sorted(marks), slots)
    return Template(
        re.compile(pattern), _marked(plan, edits, order), tuple(slots[i] for i in order)
    )


def _overlap(spans: list[tuple[int, int, int]]) -> bool:
    ordered = sorted(spans)
    return any(a[1] > b[0] for a, b in zip(ordered, ordered[1:], strict=False))


def _pattern(
    question: str, marks: list[tuple[int, int, int]], slots: list[Slot]
) -> tuple[str, list[int]]:
    """The question's regex (slots as groups, in question order) and that order."""
    parts, order, at = [], [], 0
    for start, end, index in marks:
        parts += [re.escape(question[at:start]), slots[index].pattern()]
        order.append(index)
        at = end
    parts.append(re.escape(question[at:]))
    return "".join(parts), order


def _marked(plan: str, edits: list[tuple[int, int, int]], order: list[int]) -> str:
    """`plan` with each literal's spans replaced by its slot's mark (slots numbered in
    question order)."""
    position = {index: n for n, index in enumerate(order)}
    out, at = [], 0
    for start, end, index in sorted(edits):
        out += [plan[at:start], _MARK.format(position[index])]
        at = end
    out.append(plan[at:])
    return "".join(out)


def toolset_key(tools: Iterable[BaseTool], rules: RunPolicies, dialect: str) -> str:
    """A digest of the tools a plan may call, their policies and the plan format."""
    parts = [dialect]
    for tool in sorted(tools, key=lambda t: t.metadata.get_name()):
        name = tool.metadata.get_name()
        shown = json.dumps(rules.of(name).shown(), sort_keys=True, default=repr)
        parts += [fingerprint(tool), shown]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


class PlanCache:
    """Templates by tool set, the most recently used `kept` of each (see the module
    docstring)."""

    def __init__(self, kept: int = TEMPLATES_KEPT) -> None:
        self.kept = kept
        self._sets: dict[str, OrderedDict[str, Template]] = {}

    def keep(self, tools_key: str, template: Template) -> None:
        """Keep `template` for the tool set `tools_key` (replacing one of its shape)."""
        templates = self._sets.setdefault(tools_key, OrderedDict())
        templates[template.pattern.pattern] = template
        templates.move_to_end(template.pattern.pattern)
        while len(templates) > self.kept:
            templates.popitem(last=False)

    def plans(self, tools_key: str, question: str) -> Iterator[str]:
        """The filled plans of the templates `question` matches, newest first."""
        for template in reversed(self._sets.get(tools_key, {}).values()):
            filled = template.fill(question)
            if filled is not None:
                yield filled

    def learn(self, state: CompilerState, tools: ToolSet, rules: RunPolicies, dialect: str) -> None:
        """Keep the first round of `state`'s run as a template if the run answered from it
        alone: no replan, no plan error, every task done, the plan not itself a filled one."""
        if state.replans or not state.rounds or state.verdict is not None:
            return
        record = state.rounds[0]
        tasks = state.round_tasks(0)
        if record.errors or record.cached_plan or not tasks:
            return
        if any(state.outcomes.get(t.id) is None or state.outcomes[t.id].is_error for t in tasks):
            return
        template = learn(state.question, record.text, tasks)
        if template is not None:
            self.keep(toolset_key(tools, rules, dialect), template)

    def plan_for(
        self,
        question: str,
        tools: ToolSet,
        rules: RunPolicies,
        dialect: str,
        parse: Callable[[str], PlanEvent],
    ) -> PlanEvent | None:
        """The plan of the newest template `question` fills whose plan parses without an
        error (marked ``cached``), or None: plan with the model."""
        for text in self.plans(toolset_key(tools, rules, dialect), question):
            plan = parse(text)
            if not plan.errors and all(t.error is None for t in plan.tasks):
                return plan.model_copy(update={"cached": True})
        return None

    def clear(self) -> None:
        """Forget every template."""
        self._sets.clear()

    def __len__(self) -> int:
        return sum(len(t) for t in self._sets.values())
