"""The LLMCompiler plan format: a streaming parser of numbered plan lines.

Feed it token deltas and it returns each task as soon as its line is complete (at the
call's closing parenthesis). Arguments are parsed by :mod:`llm_compiler.arguments`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from llm_compiler.arguments import (
    PlanLineError,
    find_closing_paren,
    parse_arguments,
    parse_json_call,
)
from llm_compiler.plan import END_OF_PLAN, JOIN_TOOL, PlanTask, iter_refs, render_call

_TASK_LINE = re.compile(r"^[\s*#>-]*(\d+)\s*[.):]\s*(.*)$", re.DOTALL)
_THOUGHT = re.compile(r"^[\s*#>-]*thought\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)
_NEW_EXAMPLE = re.compile(r"^\s*(question|human|user)\s*:", re.IGNORECASE)
_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\((.*)$", re.DOTALL)
_JOIN = re.compile(r"^join\s*\(\s*\)?", re.IGNORECASE)


def parse_task_line(
    task_id: int,
    body: str,
    *,
    earlier: Iterable[int],
    round: int = 0,
    thought: str | None = None,
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
) -> PlanTask:
    """Parse the part of a plan line after ``N.``; never raises.

    A line that cannot run comes back with `error` set. `alias` and `written_id` are for
    a renumbered plan (see :class:`PlanParser`).
    """
    body = body.replace(END_OF_PLAN, "").strip()
    text = f"{task_id}. {body}"
    base = {"id": task_id, "text": text, "round": round, "thought": thought}
    earlier = set(earlier)
    try:
        if _JOIN.match(body):
            return PlanTask(tool=JOIN_TOOL, **base)
        if body.startswith("{"):
            tool, args, kwargs = parse_json_call(body, task_id, earlier, alias, written_id)
        else:
            m = _CALL.match(body)
            if not m:
                raise PlanLineError(f"Task {task_id} is not of the form tool(arguments): {body!r}")
            tool, rest = m.group(1), m.group(2)
            close, open_brackets = find_closing_paren(rest)
            inner = (
                rest[:close]
                if close is not None
                else rest.rstrip() + "".join(reversed(open_brackets))
            )
            args, kwargs = parse_arguments(
                inner, own_id=task_id, earlier=earlier, alias=alias, written_id=written_id
            )
    except PlanLineError as e:
        return PlanTask(tool=_guess_tool(body), error=str(e), **base)
    deps = sorted(set(iter_refs(args)) | set(iter_refs(kwargs)))
    task = PlanTask(tool=tool, args=args, kwargs=kwargs, deps=deps, **base)
    if alias:  # show the line with the ids it runs under
        task.text = f"{task_id}. {render_call(task)}"
    return task


def _guess_tool(body: str) -> str:
    m = _CALL.match(body)
    return m.group(1) if m else "?"


@dataclass
class PlanParser:
    """Incremental parser of planner output.

    Feed it text deltas; it returns tasks whose lines are complete. It stops at
    ``join()``, ``<END_OF_PLAN>``, a line that starts a new example (``Question:``),
    or `max_tasks` tasks; then `done` is true and further text is ignored.

    A replan must continue the numbering. Small models often restart at 1: when the first
    task of a replan reuses a taken id, the whole plan is renumbered from the next free
    id, and its references to its own earlier lines follow (a ``$n`` that names no line of
    the new plan still means task n of an earlier round).

    Attributes:
        known_ids: Task ids of earlier rounds (valid reference targets).
        taken_ids: Other ids a new task may not reuse (earlier ``join()`` lines).
        round: The planning round, stamped on each task.
        max_tasks: Most tasks accepted in one plan.
    """

    known_ids: Iterable[int] = ()
    taken_ids: Iterable[int] = ()
    round: int = 0
    max_tasks: int = 100

    def __post_init__(self) -> None:
        self._earlier: set[int] = set(self.known_ids)
        self._all_known: set[int] = self._earlier | set(self.taken_ids)
        self._offset: int | None = None if self._all_known else 0
        self._alias: dict[int, int] = {}
        self._buffer = ""
        self._line_taken = False
        self._thought: list[str] = []
        self.tasks: list[PlanTask] = []
        self.errors: list[str] = []
        self.thoughts: list[str] = []
        self.text = ""
        self.joined = False
        self.join_id: int | None = None
        self.done = False

    def feed(self, delta: str) -> list[PlanTask]:
        """Add streamed text; return the tasks completed by it."""
        if self.done or not delta:
            return []
        self.text += delta
        self._buffer += delta
        out: list[PlanTask] = []
        while not self.done:
            end_mark = self._buffer.find(END_OF_PLAN)
            newline = self._buffer.find("\n")
            if newline < 0 and end_mark < 0:
                out += self._early_call()
                break
            if end_mark >= 0 and (newline < 0 or end_mark < newline):
                line, self._buffer = self._buffer[:end_mark], ""
                out += self._take(line)
                self.done = True
                break
            line, self._buffer = self._buffer[:newline], self._buffer[newline + 1 :]
            out += self._take(line)
        return out

    def _take(self, line: str) -> list[PlanTask]:
        if self._line_taken:  # the call on this line was already parsed at its ")"
            self._line_taken = False
            return []
        return self._line(line)

    def _early_call(self) -> list[PlanTask]:
        """Parse a task line at its closing parenthesis, before the newline arrives."""
        if self._line_taken:
            return []
        m = _TASK_LINE.match(self._buffer.strip())
        call = _CALL.match(m.group(2)) if m else None
        if call is None or find_closing_paren(call.group(2))[0] is None:
            return []
        self._line_taken = True
        return self._line(self._buffer)

    def finish(self) -> list[PlanTask]:
        """Flush the last line at the end of the stream and record plan-level errors."""
        out: list[PlanTask] = []
        if not self.done and self._buffer.strip():
            out = self._take(self._buffer)
        self._buffer = ""
        self.done = True
        if not self.tasks:
            self.errors.append("The plan has no tasks.")
        if not self.joined:
            self.errors.append("The plan did not end with join().")
        return out

    def _line(self, line: str) -> list[PlanTask]:
        stripped = line.strip().strip("`").strip()
        if not stripped:
            return []
        thought = _THOUGHT.match(stripped)
        if thought:
            self._thought.append(thought.group(1).strip())
            self.thoughts.append(thought.group(1).strip())
            return []
        if _NEW_EXAMPLE.match(stripped) and (self.tasks or self.joined):
            self.done = True
            return []
        m = _TASK_LINE.match(stripped)
        if not m:
            return []  # prose around the plan ("Here is the plan:")
        written, body = int(m.group(1)), m.group(2).lstrip("*_ ")
        if self._offset is None:
            first_free = max(self._all_known) + 1
            self._offset = first_free - written if written in self._all_known else 0
        task_id = written + self._offset
        if task_id in self._all_known:
            self.errors.append(f"Line {stripped!r} reuses task id {task_id}; it was not run.")
            return []
        thought_text = " ".join(self._thought) or None
        self._thought = []
        renumbered = self._offset != 0
        task = parse_task_line(
            task_id,
            body,
            earlier=self._earlier,
            round=self.round,
            thought=thought_text,
            alias=self._alias if renumbered else None,
            written_id=written,
        )
        if renumbered:
            self._alias[written] = task_id
        if task.is_join:
            self.joined, self.join_id, self.done = True, task_id, True
            self._all_known.add(task_id)
            return []
        if len(self.tasks) >= self.max_tasks:
            self.errors.append(
                f"The plan has more than {self.max_tasks} tasks; task {task_id} and later "
                "lines were not run."
            )
            self.done = True
            return []
        self._all_known.add(task_id)
        self._earlier.add(task_id)
        self.tasks.append(task)
        return [task]
