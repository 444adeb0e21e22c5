"""A run's state as journal rows, and back: the diff of two states, and the fold of rows.

The engine's :class:`~llm_compiler.engine.state.CompilerState` holds facts only, so what
must survive a crash is a few kinds of rows, each keyed within its run:

========  ==================  =========================================================
kind      key                 body
========  ==================  =========================================================
task      task id             a task of a plan (``PlanTask``), admitted once
result    ``round:task id``   the task's first outcome (``TaskOutcome``), written once
log       position            the scheduler's journal entry (``SchedStep``), written once
llm       position            one planner or joiner call's usage (``LLMCallUsage``)
round     round               the round's record (plan text, verdict, tokens); replaced
head      (empty)             question, conversation, mode, held plan, verdict, answer;
                              replaced
========  ==================  =========================================================

The first four are facts (``INSERT ... ON CONFLICT DO NOTHING``: the first row stands);
``round`` and ``head`` hold the few fields a run updates (replaced by the newest).
:func:`fold` rebuilds the state from the rows, so a resumed run decides as it would have.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llm_compiler.engine.state import CompilerState

#: Kinds whose first row stands (facts); the others are replaced by the newest row.
FACTS = ("task", "result", "log", "llm", "start", "started")
_BY_ID = {"tasks": "task"}
_APPENDED = {"log": "log", "llm_calls": "llm"}
_LIVE = {"memory", "toolset"}


@dataclass(frozen=True)
class Row:
    """One journal row of a run."""

    kind: str
    key: str
    body: str

    @property
    def fact(self) -> bool:
        """Whether the first row of this kind and key stands (else the newest does)."""
        return self.kind in FACTS


_HEAD = [
    name
    for name in CompilerState.model_fields
    if name not in {*_BY_ID, *_APPENDED, "outcomes", "rounds", *_LIVE}
]


def diff(old: CompilerState | None, new: CompilerState) -> list[Row]:
    """The rows that record what `new` adds to `old` (everything, if `old` is None or
    another run's state)."""
    if old is None or old.run_id != new.run_id:
        old = None
    rows: list[Row] = []
    seen_tasks = old.tasks if old is not None else {}
    rows += [
        Row("task", str(i), t.model_dump_json())
        for i, t in new.tasks.items()
        if i not in seen_tasks
    ]
    seen = old.outcomes if old is not None else {}
    for tid, outcome in new.outcomes.items():
        if tid not in seen:
            round = new.tasks[tid].round if tid in new.tasks else 0
            rows.append(Row("result", f"{round}:{tid}", outcome.model_dump_json()))
    for field, kind in _APPENDED.items():
        before = len(getattr(old, field)) if old is not None else 0
        items = getattr(new, field)
        rows += [Row(kind, str(i), items[i].model_dump_json()) for i in range(before, len(items))]
    old_rounds = old.rounds if old is not None else []
    for i, record in enumerate(new.rounds):
        if i >= len(old_rounds) or old_rounds[i] != record:
            rows.append(Row("round", str(i), record.model_dump_json()))
    if old is None or any(getattr(old, f) != getattr(new, f) for f in _HEAD):
        head = new.model_dump(mode="json", include=set(_HEAD))
        rows.append(Row("head", "", json.dumps(head, ensure_ascii=False)))
    return rows


def fold(rows: Iterable[tuple[str, str, str]]) -> CompilerState | None:
    """The state the rows (kind, key, body) record; None if they hold no ``head`` row."""
    head: dict[str, Any] | None = None
    tasks: dict[int, Any] = {}
    outcomes: dict[int, Any] = {}
    lists: dict[str, dict[int, Any]] = {"log": {}, "llm": {}, "round": {}}
    for kind, key, body in rows:
        value = json.loads(body)
        if kind == "head":
            head = value
        elif kind == "task":
            tasks[int(key)] = value
        elif kind == "result":
            outcomes[int(key.split(":")[1])] = value
        elif kind in lists:
            lists[kind][int(key)] = value
    if head is None:
        return None
    data = {
        **head,
        "tasks": tasks,
        "outcomes": outcomes,
        "log": [lists["log"][i] for i in sorted(lists["log"])],
        "llm_calls": [lists["llm"][i] for i in sorted(lists["llm"])],
        "rounds": [lists["round"][i] for i in sorted(lists["round"])],
    }
    return CompilerState.model_validate(data)
