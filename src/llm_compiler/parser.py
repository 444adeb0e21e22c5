"""Parsers for planner and joiner text, tolerant of what real models write.

The planner parser is incremental: feed it token deltas and it returns each task as soon
as its line is complete. Arguments are parsed with :mod:`ast` and JSON only; nothing the
model writes is ever executed.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from llm_compiler.plan import CONCAT, JOIN_TOOL, PlanTask, iter_refs, ref, render_call

END_OF_PLAN = "<END_OF_PLAN>"

_TASK_LINE = re.compile(r"^[\s*#>-]*(\d+)\s*[.):]\s*(.*)$", re.DOTALL)
_THOUGHT = re.compile(r"^[\s*#>-]*thought\s*:\s*(.*)$", re.IGNORECASE | re.DOTALL)
_NEW_EXAMPLE = re.compile(r"^\s*(question|human|user)\s*:", re.IGNORECASE)
_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\s*\((.*)$", re.DOTALL)
_JOIN = re.compile(r"^join\s*\(\s*\)?", re.IGNORECASE)
_WHOLE_REF = re.compile(r"^\$(?:\{(\d+)\}|(\d+))$")
# `$1` must not match inside `$10`, nor be the start of a number such as `$1.5` or `$1,000`.
_TEXT_REF = re.compile(r"\$\{(\d+)\}|\$(\d+)(?![\d])(?![.,]\d)")
_BARE_REF = re.compile(r"\$\{(\d+)\}|\$(\d+)(?![\d])")
_PLACEHOLDER = re.compile(r"^__ref_(\d+)__$")


class PlanLineError(ValueError):
    """A plan line that cannot become a runnable task."""


# --------------------------------------------------------------------------- scanning


def _scan(text: str) -> tuple[int | None, list[str]]:
    """Find the ``)`` that closes an already-open call, skipping string literals.

    Returns the index of that parenthesis (or None) and the brackets still open at the
    end of `text` when there is none.
    """
    stack: list[str] = []
    quote: str | None = None
    i = 0
    pairs = {"(": ")", "[": "]", "{": "}"}
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")]}":
            if not stack:
                if ch == ")":
                    return i, []
            elif stack[-1] == ch:
                stack.pop()
        i += 1
    return None, stack


def _replace_bare_refs(text: str) -> str:
    """Turn ``$3``/``${3}`` written outside string literals into placeholder names."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            out.append(ch)
        elif ch == "$":
            m = _BARE_REF.match(text, i)
            if m:
                out.append(f"__ref_{m.group(1) or m.group(2)}__")
                i = m.end()
                continue
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


# --------------------------------------------------------------------------- arguments


class _Converter:
    """Turns an argument AST into JSON-safe values with references."""

    def __init__(
        self,
        own_id: int,
        earlier: set[int],
        source: str,
        alias: dict[int, int] | None = None,
        written_id: int | None = None,
    ) -> None:
        self.own_id = own_id
        self.earlier = earlier
        self.source = source
        self.alias = alias or {}
        self.written_id = own_id if written_id is None else written_id

    def is_ref(self, n: int, explicit: bool) -> int | None:
        """The task id `$n` refers to, or None when it is just text."""
        if n == self.written_id:
            raise PlanLineError(f"Task {self.own_id} references itself (${n}).")
        if n in self.alias:
            return self.alias[n]
        if n in self.earlier:
            return n
        if explicit:
            raise PlanLineError(
                f"Task {self.own_id} references task {n}, which is not an earlier task."
            )
        return None

    def text(self, s: str, explicit: bool = False) -> Any:
        """A string literal: a whole reference, a template, or plain text."""
        whole = _WHOLE_REF.match(s.strip())
        if whole:
            n = int(whole.group(1) or whole.group(2))
            target = self.is_ref(n, explicit or whole.group(1) is not None)
            return s if target is None else ref(target)
        parts: list[Any] = []
        pos = 0
        for m in _TEXT_REF.finditer(s):
            n = int(m.group(1) or m.group(2))
            target = self.is_ref(n, explicit or m.group(1) is not None)
            if target is None:
                continue
            parts.append(s[pos : m.start()])
            parts.append(ref(target))
            pos = m.end()
        if not parts:
            return s
        parts.append(s[pos:])
        return _concat(parts)

    def node(self, node: ast.AST) -> Any:  # noqa: C901 - one branch per node kind
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return self.text(node.value)
            if isinstance(node.value, (int, float, bool)) or node.value is None:
                return node.value
            return self.source_text(node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self.node(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out: dict[str, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                key = self.node(k) if k is not None else None
                if not isinstance(key, (str, int, float, bool)):
                    return self.source_text(node)
                out[str(key)] = self.node(v)
            return out
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))
            and not isinstance(node.operand.value, bool)
        ):
            v = node.operand.value
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.Name):
            m = _PLACEHOLDER.match(node.id)
            if m:
                target = self.is_ref(int(m.group(1)), explicit=True)
                assert target is not None  # explicit references raise instead
                return ref(target)
            return node.id  # a bare word: search(Rosetta)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.node(node.left), self.node(node.right)
            if _stringish(left) or _stringish(right):
                return _concat([left, right])
        return self.source_text(node)

    def source_text(self, node: ast.AST) -> Any:
        """An expression we do not evaluate: pass its source as text."""
        seg = ast.get_source_segment(self.source, node) or ""
        seg = re.sub(r"__ref_(\d+)__", r"${\1}", seg)
        return self.text(seg)


def _stringish(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, dict) and CONCAT in v)


def _concat(parts: Iterable[Any]) -> Any:
    flat: list[Any] = []
    for p in parts:
        items = p[CONCAT] if isinstance(p, dict) and CONCAT in p else [p]
        for item in items:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if isinstance(item, str) and flat and isinstance(flat[-1], str):
                flat[-1] += item
            elif item != "":
                flat.append(item)
    if not flat:
        return ""
    if len(flat) == 1 and isinstance(flat[0], str):
        return flat[0]
    return {CONCAT: flat}


def parse_arguments(
    text: str,
    *,
    own_id: int,
    earlier: Iterable[int],
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
) -> tuple[list[Any], dict[str, Any]]:
    """Parse the inside of ``tool(...)`` into positional and keyword arguments.

    Accepts Python-literal syntax, unquoted text (``search(In Cold Blood)``), and
    ``$N``/``${N}`` references anywhere. `alias` maps ids as the planner wrote them to
    the ids they were renumbered to (`written_id` is this task's). Raises PlanLineError
    for invalid references.
    """
    conv = _Converter(own_id, set(earlier), "", alias, written_id)
    if not text.strip():
        return [], {}
    prepared = _replace_bare_refs(text)
    source = f"_f({prepared})"
    try:
        call = ast.parse(source, mode="eval").body
    except SyntaxError:
        # Unquoted free text (the original few-shot plans do this): one string argument.
        return [conv.text(_strip_quotes(text.strip()))], {}
    assert isinstance(call, ast.Call)
    conv.source = source
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        raise PlanLineError("Star arguments (*args, **kwargs) are not supported in a plan.")
    args = [conv.node(a) for a in call.args]
    kwargs = {k.arg: conv.node(k.value) for k in call.keywords if k.arg}
    return args, kwargs


def _strip_quotes(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def _json_value(conv: _Converter, value: Any) -> Any:
    if isinstance(value, str):
        return conv.text(value)
    if isinstance(value, list):
        return [_json_value(conv, v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(conv, v) for k, v in value.items()}
    return value


# --------------------------------------------------------------------------- plan lines


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
            tool, args, kwargs = _parse_json_call(body, task_id, earlier, alias, written_id)
        else:
            m = _CALL.match(body)
            if not m:
                raise PlanLineError(f"Task {task_id} is not of the form tool(arguments): {body!r}")
            tool, rest = m.group(1), m.group(2)
            close, open_brackets = _scan(rest)
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


def _parse_json_call(
    body: str,
    task_id: int,
    earlier: set[int],
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
) -> tuple[str, list, dict]:
    try:
        obj, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as e:
        raise PlanLineError(f"Task {task_id} is not valid JSON: {e.msg}.") from None
    conv = _Converter(task_id, earlier, "", alias, written_id)
    if isinstance(obj, dict) and "tool" in obj and isinstance(obj["tool"], str):
        name, payload = obj["tool"], obj.get("args", obj.get("arguments", {}))
    elif isinstance(obj, dict) and len(obj) == 1:
        name, payload = next(iter(obj.items()))
    else:
        raise PlanLineError(f'Task {task_id} must be {{"tool_name": {{"arg": value}}}}.')
    if isinstance(payload, dict):
        return name, [], {str(k): _json_value(conv, v) for k, v in payload.items()}
    if isinstance(payload, list):
        return name, [_json_value(conv, v) for v in payload], {}
    return name, [_json_value(conv, payload)], {}


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
        if call is None or _scan(call.group(2))[0] is None:
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


# --------------------------------------------------------------------------- joiner

_ACTION = re.compile(r"^[\s*#>-]*action\s*:\s*(finish|replan)\b\s*[(:]?", re.I | re.M)
_STOP_LINE = re.compile(
    r"^\s*(thought|action|question|observation)\s*:|^\s*<END_OF_RESPONSE>|^\s*###", re.I | re.M
)
_THOUGHT_BLOCK = re.compile(r"thought\s*:\s*(.*?)(?=^[\s*#>-]*action\s*:|\Z)", re.I | re.S | re.M)


@dataclass(frozen=True)
class JoinerDecision:
    """What the joiner decided.

    Attributes:
        action: ``finish`` (answer the user) or ``replan`` (plan again).
        content: The answer, or the reason to replan.
        thought: The joiner's ``Thought:``, if any.
    """

    action: Literal["finish", "replan"]
    content: str
    thought: str | None = None


def parse_joiner_output(text: str) -> JoinerDecision:
    """Parse ``Thought: ...`` / ``Action: Finish(answer)`` or ``Action: Replan(reason)``.

    The answer may span lines and contain parentheses; a missing closing parenthesis is
    tolerated; "Replan" inside an answer is just text. Text without an ``Action:`` line
    is taken as the answer.
    """
    text = text.replace("<END_OF_RESPONSE>", "\n")
    m = _ACTION.search(text)
    thought_m = _THOUGHT_BLOCK.search(text[: m.start()] if m else text)
    thought = thought_m.group(1).strip() or None if thought_m else None
    if not m:
        body = _THOUGHT.sub("", text).strip() if not thought else ""
        return JoinerDecision("finish", body or (thought or "").strip(), thought)
    rest = text[m.end() :]
    stop = _STOP_LINE.search(rest)
    body = (rest[: stop.start()] if stop else rest).strip()
    if body.endswith(")") and body.count(")") > body.count("("):
        body = body[:-1].rstrip()
    action: Literal["finish", "replan"] = "finish" if m.group(1).lower() == "finish" else "replan"
    if action == "finish" and not body:
        body = thought or ""
    return JoinerDecision(action, body, thought)
