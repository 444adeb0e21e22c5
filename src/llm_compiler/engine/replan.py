"""What the engine does after a round whose tasks failed: which tasks to plan again, and
why (the facts of each outcome are :func:`~llm_compiler.dialects.prompting.found_nothing`
and its neighbours)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from llm_compiler.dialects.prompting import RoundRecord, TaskRecord, found_nothing, rejected

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


def failed_tasks(record: RoundRecord) -> list[TaskRecord]:
    """The round's tasks that found nothing (see
    :func:`~llm_compiler.dialects.prompting.found_nothing`), but for those about a thing
    another task found something about (a failed ``lookup("Ada Lovelace", "age")``
    beside a ``search("Ada Lovelace")`` that found her), those skipped because a task
    before them failed (that one is listed), and those a human rejected (planning them
    again would ask again)."""
    found = {_subject(t) for t in record.tasks if not found_nothing(t)}
    return [
        t
        for t in record.tasks
        if found_nothing(t) and not t.skipped and not rejected(t) and _subject(t) not in found
    ]


def _subject(task: TaskRecord) -> str:
    """What a task is about: its first string argument (lower case), or its line."""
    match = _STRING.search(task.text)
    return (match.group(1) or match.group(2) or "" if match else task.text).strip().lower()


def replan_reason(failed: Sequence[TaskRecord]) -> str:
    """Why to plan again after tasks that failed or found nothing: each call and what
    it got (a tool that failed is said to have failed, not to have found nothing)."""
    shown = "; ".join(
        f"{t.text.strip()} gave {(t.observation or 'no result')[:160]!r}" for t in failed
    )
    return (
        f"These actions failed or found nothing: {shown}. Plan them again, differently: "
        "with values copied exactly from the question, and the values the errors say exist."
    )
