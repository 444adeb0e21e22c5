"""The plan cache: a question of a shape already answered gets that answer's plan, its
values replaced by the new question's, instead of a planner call.

After a run that answered in its first round with every task done, its plan is kept as a
template. Each argument value of the plan is a slot if every one can be: a string or
number the plan uses once and the question writes once, exactly as the plan writes it
(``60``, not ``-60``, ``60.5`` or ``sixty``). If any cannot (a value the planner derived:
computed, converted, a constant like the ``60`` of "seconds in 5 minutes", a value used
twice, a boolean), or the plan calls a tool with a string (a name) while the tool set
holds another tool that takes the same arguments (which of them to call may depend on the
name), the template has no slot: it fills only the same question. Every other word of the
question must match exactly: a new question fills the slots from its own words at the
same places, so ``5 minus 3`` and ``3 minus 5`` fill ``a`` and ``b`` by position and never
swap. A slot takes as many words as the value it replaced, and a number slot only a
number. Templates are kept per workflow and per tool set (the tools' names, descriptions
and schemas, their policies and the dialect): another tool set finds none. A template
whose plan calls a tool that is not ``pure`` is used only with
``cache_plans_with_effects``. A replan always plans afresh, and the joiner judges the
results as for any plan.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
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
    """A question's shape and the plan text to fill (`pure`: it calls ``pure`` tools only)."""

    pattern: re.Pattern[str]
    plan: str
    slots: tuple[Slot, ...]
    pure: bool = False

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


def arguments(tasks: Iterable[PlanTask]) -> list[Any] | None:
    """Every scalar argument value (string, number) of `tasks`, in order and repeats kept;
    None if an argument holds another value (a boolean, a null)."""
    out: list[Any] = []

    def walk(value: Any) -> bool:
        if isinstance(value, dict):
            return "$ref" in value or all(walk(v) for v in value.values())
        if isinstance(value, list | tuple):
            return all(walk(v) for v in value)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            out.append(value)
            return True
        return False

    return out if all(walk(task.kwargs) for task in tasks) else None


def _spans(text: str, needle: str) -> list[tuple[int, int]]:
    pattern = rf"(?<![\w.\-]){re.escape(needle)}(?![\w]|\.\d)"
    return [m.span() for m in re.finditer(pattern, text)]


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


def learn(
    question: str, plan: str, tasks: Iterable[PlanTask], slots: bool = True
) -> Template | None:
    """The template of `question` answered by `plan` (its text) and `tasks` (None if
    there are none): with a slot for each argument value if each can be one and `slots`,
    else one that fills only `question` itself."""
    question, tasks = normal(question), list(tasks)
    if not tasks:
        return None
    slotted = _slotted(question, plan, tasks) if slots else None
    return slotted or Template(re.compile(re.escape(question)), plan, ())


def _slotted(question: str, plan: str, tasks: list[PlanTask]) -> Template | None:
    """The template with a slot for each argument value, or None if a value is no slot."""
    values = arguments(tasks)
    if not values:
        return None
    marks: list[tuple[int, int, int]] = []  # question spans, slot index
    edits: list[tuple[int, int, int]] = []  # plan spans, slot index
    slots: list[Slot] = []
    for value in values:
        text = repr(value) if isinstance(value, float) else str(value)
        where = _spans(question, text)
        quote, in_plan = _plan_spans(plan, value)
        if values.count(value) > 1 or len(where) != 1 or len(in_plan) != 1:
            return None  # derived, or used or written more than once: no slot
        kind = "str" if isinstance(value, str) else type(value).__name__
        slots.append(Slot(kind, len(text.split()), quote))
        marks.append((*where[0], len(slots) - 1))
        edits.append((*in_plan[0], len(slots) - 1))
    if _overlap(marks) or _overlap(edits):
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


def alternative(tools: ToolSet, task: PlanTask) -> bool:
    """Whether `task` has a string argument (a name, which may be what chose its tool) and
    `tools` holds another tool taking the same arguments as its own."""
    own = tools.get(task.tool)
    if own is None or not any(isinstance(v, str) for v in arguments([task]) or ()):
        return False
    params = _params(own)
    return any(t is not own and _params(t) == params for t in tools)


def _params(tool: BaseTool) -> frozenset[str]:
    try:
        return frozenset(tool.metadata.get_parameters_dict().get("properties", {}))
    except Exception:  # noqa: BLE001 - a schema that cannot be rendered: no arguments known
        return frozenset()


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

    def plans(self, tools_key: str, question: str, effects: bool = False) -> Iterator[str]:
        """The filled plans of the templates `question` matches, newest first (not
        `effects`: of those calling ``pure`` tools only)."""
        for template in reversed(self._sets.get(tools_key, {}).values()):
            filled = template.fill(question) if effects or template.pure else None
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
        slots = not any(alternative(tools, t) for t in tasks)
        template = learn(state.question, record.text, tasks, slots)
        if template is None:
            return
        pure = all(rules.of(t.tool).side_effect == "pure" for t in tasks)
        self.keep(toolset_key(tools, rules, dialect), replace(template, pure=pure))

    def plan_for(
        self,
        question: str,
        tools: ToolSet,
        rules: RunPolicies,
        dialect: str,
        parse: Callable[[str], PlanEvent],
        effects: bool = False,
    ) -> PlanEvent | None:
        """The plan of the newest template `question` fills whose plan parses without an
        error (marked ``cached``), or None: plan with the model. Not `effects`: templates
        that call only ``pure`` tools."""
        for text in self.plans(toolset_key(tools, rules, dialect), question, effects):
            plan = parse(text)
            if not plan.errors and all(t.error is None for t in plan.tasks):
                return plan.model_copy(update={"cached": True})
        return None

    def clear(self) -> None:
        """Forget every template."""
        self._sets.clear()

    def __len__(self) -> int:
        return sum(len(t) for t in self._sets.values())
