"""The LLMCompiler plan lines: a streaming parser of numbered `tool(args)` lines.

Feed it token deltas and it returns each task as soon as its line is complete (at the
call's closing parenthesis). Arguments are parsed by :mod:`llm_compiler.dialects.arguments`.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from llm_compiler.dialects.arguments import (
    ParenScanner,
    PlanLineError,
    find_closing_paren,
    nesting_depth,
    parse_arguments,
    parse_json_call,
)
from llm_compiler.plan import (
    END_OF_PLAN,
    JOIN_TOOL,
    PlanError,
    PlanErrorKind,
    PlanTask,
    iter_refs,
    render_call,
)

#: Default bounds; the engine passes its own (see ``CompilerConfig``).
MAX_ARG_DEPTH = 20
MAX_LINE_CHARS = 20_000
MAX_PLAN_CHARS = 200_000
MAX_PLAN_ERRORS = 20
#: Most digits of a task number (larger ones are an error, not a task).
MAX_ID_DIGITS = 9

_TASK_LINE = re.compile(r"^[\s*#>-]*(\d+)\s*[.):]\s*(.*)$", re.DOTALL)
_THOUGHT = re.compile(r"^[\s*#>-]*thought\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)
_NEW_EXAMPLE = re.compile(r"^\s*(question|human|user)\s*:", re.IGNORECASE)
_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\((.*)$", re.DOTALL)
_JOIN = re.compile(r"^join\s*\(\s*\)?", re.IGNORECASE)
# A line so far that ends at its call's "(": `N. tool(` (parsed early at the matching ")").
_EARLY_CALL = re.compile(r"^[\s*#>-]*\d+\s*[.):]\s*[A-Za-z_][\w.\-]*\s*\($")


def parse_task_line(
    task_id: int,
    body: str,
    *,
    earlier: Iterable[int],
    round: int = 0,
    thought: str | None = None,
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
    max_depth: int = MAX_ARG_DEPTH,
) -> PlanTask:
    """Parse the part of a plan line after ``N.``; never raises.

    A line that cannot run (bad syntax, a bad reference, arguments nested deeper than
    `max_depth`, anything the parsers reject) comes back with `error` set. `alias` and
    `written_id` are for a renumbered plan (see :class:`PlanParser`).
    """
    body = body.replace(END_OF_PLAN, "").strip()
    base: dict[str, Any] = {
        "id": task_id,
        "text": f"{task_id}. {body}",
        "round": round,
        "thought": thought,
    }
    try:
        task = _parse_call(task_id, body, set(earlier), alias, written_id, max_depth, base)
    except PlanLineError as e:
        error = e.error
    except RecursionError:  # a chain of thousands of attributes or unary operators
        error = PlanError(f"Task {task_id}'s arguments are too deeply nested to read.", "too_large")
    except Exception as e:  # noqa: BLE001 - bad data is one error observation, whatever it is
        message = f"Task {task_id} could not be read: {type(e).__name__}: {_clip(str(e))}"
        error = PlanError(message, "not_a_call")
    else:
        if alias:  # show the line with the ids it runs under
            task.text = f"{task_id}. {render_call(task)}"
        return task
    base["text"] = f"{task_id}. {_clip(body)}"  # it is shown in prompts: keep it short
    return PlanTask(tool=_guess_tool(body[:200]), error=error, **base)


def _parse_call(
    task_id: int,
    body: str,
    earlier: set[int],
    alias: dict[int, int] | None,
    written_id: int | None,
    max_depth: int,
    base: dict[str, Any],
) -> PlanTask:
    if _JOIN.match(body):
        return PlanTask(tool=JOIN_TOOL, **base)
    if nesting_depth(body) > max_depth + 1:  # +1: the call's own parentheses
        raise PlanLineError(
            f"Task {task_id}'s arguments are nested deeper than {max_depth}.", "too_large"
        )
    if body.startswith("{"):
        tool, args, kwargs = parse_json_call(body, task_id, earlier, alias, written_id)
    else:
        m = _CALL.match(body)
        if not m:
            raise PlanLineError(
                f"Task {task_id} is not of the form tool(arguments): {_clip(repr(body))}",
                "not_a_call",
            )
        tool, rest = m.group(1), m.group(2)
        close, open_brackets = find_closing_paren(rest)
        if close is not None:  # the line as the call wrote it, whatever streamed after
            inner = rest[:close]
            base = {**base, "text": f"{task_id}. {body[: m.start(2) + close + 1]}"}
        else:
            inner = rest.rstrip() + "".join(reversed(open_brackets))
        args, kwargs = parse_arguments(
            inner, own_id=task_id, earlier=earlier, alias=alias, written_id=written_id
        )
    deps = sorted(set(iter_refs(args)) | set(iter_refs(list(kwargs.values()))))
    return PlanTask(tool=tool, args=args, kwargs=kwargs, deps=deps, **base)


def _through_call(line: str) -> str:
    """A ``N. tool(...)`` line up to its call's closing parenthesis (what streaming
    parses at that parenthesis), so a line reads the same however it was chunked."""
    open_at = line.find("(")
    if open_at < 0 or not _EARLY_CALL.match(line[: open_at + 1]):
        return line
    close, _ = find_closing_paren(line[open_at + 1 :])
    return line if close is None else line[: open_at + close + 2]


def _clip(text: str, n: int = 120) -> str:
    """`text` cut to `n` characters for a message (a hostile line may be huge)."""
    return text if len(text) <= n else text[:n] + f"...({len(text) - n} more characters)"


def _guess_tool(body: str) -> str:
    m = _CALL.match(body)
    return m.group(1) if m else "?"


@dataclass
class PlanParser:
    """Incremental parser of planner output, linear in the text however it is chunked.

    Feed it text deltas; it returns tasks whose lines are complete. It stops at
    ``join()``, ``<END_OF_PLAN>``, a line that starts a new example (``Question:``),
    `max_tasks` tasks, `max_plan_errors` errors or `max_plan_chars` characters; then
    `done` is true and further text is ignored.

    Each line is a task, even one that repeats an earlier line's call: "send two
    reminders" sends two. Only a tool of `merged` (one whose repeated call the result
    cache would serve) has a repeated call merged: the line is not run, and a later
    ``$N`` naming it names the first one.

    A replan must continue the numbering. Small models often restart at 1: when the first
    task of a replan reuses a taken id, the whole plan is renumbered from the next free
    id, and its references to its own earlier lines follow (a ``$n`` that names no line of
    the new plan still means task n of an earlier round).

    Attributes:
        known_ids: Task ids of earlier rounds (valid reference targets).
        taken_ids: Other ids a new task may not reuse (earlier ``join()`` lines).
        round: The planning round, stamped on each task.
        max_tasks: Most tasks accepted in one plan.
        max_plan_chars: Most characters read; the rest is one plan error.
        max_plan_errors: Most plan errors recorded; then reading stops with one more.
        max_line_chars: Longer task lines are an error task, not parsed.
        max_arg_depth: Deeper nested arguments are an error task.
        merged: Tools whose repeated calls (same arguments, written the same way) are
            one task (see :class:`~llm_compiler.dialects.base.PlannerContext`).
    """

    known_ids: Iterable[int] = ()
    taken_ids: Iterable[int] = ()
    round: int = 0
    max_tasks: int = 100
    max_plan_chars: int = MAX_PLAN_CHARS
    max_plan_errors: int = MAX_PLAN_ERRORS
    max_line_chars: int = MAX_LINE_CHARS
    max_arg_depth: int = MAX_ARG_DEPTH
    merged: Collection[str] = ()

    def __post_init__(self) -> None:
        self._earlier: set[int] = set(self.known_ids)
        self._all_known: set[int] = self._earlier | set(self.taken_ids)
        self._offset: int | None = None if self._all_known else 0
        self._alias: dict[int, int] = {}
        self._calls: dict[str, int] = {}  # each call with arguments written: its task id
        self._parts: list[str] = []  # everything fed, joined on demand (see `text`)
        self._size = 0
        self._tail = ""  # the last characters fed: an end marker may span deltas
        self._thought: list[str] = []
        self._new_line()
        self.tasks: list[PlanTask] = []
        self.errors: list[str] = []
        self.thoughts: list[str] = []
        self.joined = False
        self.join_id: int | None = None
        self.done = False

    @property
    def text(self) -> str:
        """Everything fed so far (up to `max_plan_chars`)."""
        if len(self._parts) > 1:
            self._parts = ["".join(self._parts)]
        return self._parts[0] if self._parts else ""

    def _new_line(self) -> None:
        """Reset the state of the current line and of its incremental call scanner."""
        self._line_parts: list[str] = []
        self._line_len = 0
        self._line_taken = False
        self._scan = 0  # 0: before the call's "(", 1: inside its arguments, 2: no early parse
        self._parens = ParenScanner()

    def feed(self, delta: str) -> list[PlanTask]:
        """Add streamed text; return the tasks completed by it."""
        if self.done or not delta:
            return []
        over = self._size + len(delta) > self.max_plan_chars
        if over:
            delta = delta[: self.max_plan_chars - self._size]
        self._parts.append(delta)
        self._size += len(delta)
        end = self._find_end(delta)
        out: list[PlanTask] = []
        pos = 0
        while not self.done:
            newline = delta.find("\n", pos)
            if end is not None and (newline < 0 or end < newline):
                out += self._take(self._line_text(delta[pos : max(pos, end)], min(0, end)))
                self.done = True
                break
            if newline < 0:
                out += self._extend(delta[pos:])
                break
            out += self._take(self._line_text(delta[pos:newline]))
            self._new_line()
            pos = newline + 1
        if over and not self.done:
            self._error(
                f"The plan is longer than {self.max_plan_chars} characters; the rest was not read.",
                "too_large",
            )
            self.done = True
        return out

    def _find_end(self, delta: str) -> int | None:
        """Where the end marker starts, relative to `delta` (negative: in earlier text)."""
        k = len(END_OF_PLAN) - 1
        found = None
        if self._tail:
            i = (self._tail + delta[:k]).find(END_OF_PLAN)
            if i >= 0:
                found = i - len(self._tail)
        if found is None:
            i = delta.find(END_OF_PLAN)
            found = i if i >= 0 else None
        self._tail = delta[-k:] if len(delta) >= k else (self._tail + delta)[-k:]
        return found

    def _line_text(self, rest: str, cut: int = 0) -> str:
        """The current line: its earlier parts plus `rest`, less `cut` (<= 0) characters."""
        text = "".join(self._line_parts) + rest
        return text[: len(text) - len(rest) + cut] if cut < 0 else text

    def _extend(self, piece: str) -> list[PlanTask]:
        """Add text to the unfinished current line; parse its call at its ")"."""
        if not piece:
            return []
        self._line_parts.append(piece)
        self._line_len += len(piece)
        if self._line_taken or self._scan == 2:
            return []
        start = 0
        if self._scan == 0:
            open_at = piece.find("(")
            if open_at < 0:
                return []
            head = self._line_text("")[: self._line_len - len(piece) + open_at + 1]
            if not _EARLY_CALL.match(head):
                self._scan = 2
                return []
            self._scan, start = 1, open_at + 1
        # Scan no further than max_line_chars into the line (a longer one is read at its
        # newline, as an error): the same point whatever the chunking.
        limit = self.max_line_chars - (self._line_len - len(piece)) + 1
        if limit <= start:
            self._scan = 2
            return []
        close = self._parens.scan(piece[:limit], start)
        if close < 0:
            if len(piece) >= limit:
                self._scan = 2
            return []
        self._line_taken = True
        return self._line(self._line_text("")[: self._line_len - len(piece) + close + 1])

    def _take(self, line: str) -> list[PlanTask]:
        if self._line_taken:  # the call on this line was already parsed at its ")"
            self._line_taken = False
            return []
        return self._line(_through_call(line))

    def _error(self, message: str, kind: PlanErrorKind) -> None:
        """Record a plan error; past `max_plan_errors`, stop reading with one more."""
        if len(self.errors) + 1 < self.max_plan_errors:
            self.errors.append(PlanError(message, kind))
        elif not self.done:
            more = self.max_plan_errors - 1
            message = f"The plan has more than {more} errors; the rest was not read."
            self.errors.append(PlanError(message, "too_large"))
            self.done = True

    def finish(self) -> list[PlanTask]:
        """Flush the last line at the end of the stream and record plan-level errors."""
        out: list[PlanTask] = []
        if not self.done and self._line_len:
            out = self._take(self._line_text(""))
        self._new_line()
        self.done = True
        if not self.tasks:
            self.errors.append(PlanError("The plan has no tasks.", "empty_plan"))
        if not self.joined:
            self.errors.append(PlanError("The plan did not end with join().", "no_join"))
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
        if len(m.group(1)) > MAX_ID_DIGITS:
            self._error(
                f"Line {_clip(repr(stripped))} has a task number too large; not run.", "too_large"
            )
            return []
        written, body = int(m.group(1)), m.group(2).lstrip("*_ ")
        if self._offset is None:
            first_free = max(self._all_known) + 1
            self._offset = first_free - written if written in self._all_known else 0
        task_id = written + self._offset
        if task_id in self._all_known:
            self._error(
                f"Line {_clip(repr(stripped))} reuses task id {task_id}; it was not run.",
                "reused_id",
            )
            return []
        thought_text = " ".join(self._thought) or None
        self._thought = []
        renumbered = self._offset != 0
        task = self._parse(task_id, body, thought_text, renumbered, written)
        if renumbered:
            self._alias[written] = task_id
        if task.is_join:
            self.joined, self.join_id, self.done = True, task_id, True
            self._all_known.add(task_id)
            return []
        if self._repeats(task, written):
            return []
        if len(self.tasks) >= self.max_tasks:
            self._error(
                f"The plan has more than {self.max_tasks} tasks; task {task_id} and later "
                "lines were not run.",
                "too_many_tasks",
            )
            self.done = True
            return []
        self._all_known.add(task_id)
        self._earlier.add(task_id)
        self.tasks.append(task)
        return [task]

    def _repeats(self, task: PlanTask, written: int) -> bool:
        """Whether `task` calls a tool of `merged` with the same arguments as an earlier
        task of the plan: then it is not run, and a later ``$N`` naming it names that
        task (a call without arguments may repeat)."""
        if task.error is not None or not (task.args or task.kwargs) or task.tool not in self.merged:
            return False
        first = self._calls.setdefault(render_call(task), task.id)
        if first == task.id:
            return False
        self._alias[written] = first
        return True

    def _parse(
        self, task_id: int, body: str, thought: str | None, renumbered: bool, written: int
    ) -> PlanTask:
        if len(body) > self.max_line_chars:
            return PlanTask(
                id=task_id,
                tool=_guess_tool(body[:200]),
                text=f"{task_id}. {_clip(body)}",
                error=PlanError(
                    f"Task {task_id}'s line is longer than {self.max_line_chars} characters; "
                    "it was not run.",
                    "too_large",
                ),
                round=self.round,
                thought=thought,
            )
        return parse_task_line(
            task_id,
            body,
            earlier=self._earlier,
            round=self.round,
            thought=thought,
            alias=self._alias if renumbered or self._alias else None,
            written_id=written,
            max_depth=self.max_arg_depth,
        )
