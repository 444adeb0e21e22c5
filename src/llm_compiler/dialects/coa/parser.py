"""Chain-of-Abstraction reasoning: a streaming parser of inline calls, and the fill-in.

A reasoning is prose with inline calls::

    Uber made [FUNC search("Uber revenue 2021") = y1] and Lyft [FUNC search("Lyft
    revenue 2021") = y2], a difference of [FUNC subtract(y1, y2) = y3].

Each ``[FUNC ...]`` becomes a :class:`~llm_compiler.plan.PlanTask` the moment its closing
``]`` has streamed. Arguments are parsed by :mod:`llm_compiler.dialects.arguments` (``ast``, never
``eval``) with the names of earlier results (``y1``) as references; ``$5`` stays text.
After the calls ran, :func:`fill_in` writes each result into the reasoning, by whole
words in one pass: ``y1`` never matches inside ``y10``, and a result that happens to
contain ``y2`` is never filled again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_compiler.dialects.arguments import PlanLineError, find_closing_paren, parse_arguments
from llm_compiler.dialects.prompting import TaskRecord
from llm_compiler.plan import PlanError, PlanTask, iter_refs

_OPEN = re.compile(r"\[[ \t]*FUNC[ \t]+", re.IGNORECASE)
_CALL = re.compile(r"([A-Za-z_][\w.\-]*)[ \t]*\(")
_NAME_PREFIX = re.compile(r"(?:[A-Za-z_][\w.\-]*[ \t]*)?")
# Arguments whose brackets or quotes do not balance (`search(Arthur's Magazine)`): the
# call ends at the first `)` followed by its tail on the same line.
_LOOSE_END = re.compile(r"\)[ \t]*(?:(?:=|->)[ \t]*([^\]\n]*?)[ \t]*)?\]")
# After the call's ")": `= y1]` (or `-> y1]`), or just `]`.
_TAIL = re.compile(r"[ \t]*(?:(?:=|->)[ \t]*([^\]\n]*?)[ \t]*)?\]")
_TAIL_PREFIX = re.compile(r"[ \t]*(?:(?:=|->)[ \t]*[^\]\n]*)?")
_LABEL = re.compile(r"^[A-Za-z_]\w*$")
_LABEL_LIKE = re.compile(r"^y\d+$", re.IGNORECASE)


@dataclass(frozen=True)
class Span:
    """One ``[FUNC ...]`` of the reasoning: where it is and what it became."""

    start: int
    end: int
    task_id: int | None
    tool: str = "?"
    inner: str = ""
    label: str | None = None


@dataclass(frozen=True)
class _Scan:
    """What the text at a ``[FUNC`` holds so far."""

    kind: str  # "call", "bad" or "wait"
    end: int = 0
    tool: str = "?"
    inner: str = ""
    label: str | None = None
    error: str | None = None


def _bad_end(text: str, i: int, final: bool) -> int | None:
    """Where a malformed call ends: its ``]``, the end of its line, or None (wait)."""
    ends = [k for k in (text.find("]", i), text.find("\n", i)) if k >= 0]
    if ends:
        k = min(ends)
        return k + 1 if text[k] == "]" else k
    return len(text) if final else None


def scan_call(text: str, i: int, final: bool) -> _Scan:
    """Read the call whose name starts at `i` (just after ``[FUNC``)."""
    m = _CALL.match(text, i)
    if m is None:
        if not final and _NAME_PREFIX.fullmatch(text, i):
            return _Scan("wait")
        end = _bad_end(text, i, final)
        if end is None:
            return _Scan("wait")
        message = "This [FUNC ...] is not of the form name(arguments)."
        return _Scan("bad", end, error=PlanError(message, "not_a_call"))
    line_end = text.find("\n", m.end())  # a call closes on its own line
    close, _ = find_closing_paren(text[m.end() : None if line_end < 0 else line_end])
    if close is None:
        return _loose_call(text, m, final)
    inner = text[m.end() : m.end() + close]
    after = m.end() + close + 1
    tail = _TAIL.match(text, after)
    if tail is None:
        if not final and _TAIL_PREFIX.fullmatch(text, after):
            return _Scan("wait")
        return _Scan("call", after, m.group(1), inner)  # no "]": the call ends at ")"
    return _Scan("call", tail.end(), m.group(1), inner, _label(tail.group(1)))


def _label(written: str | None) -> str | None:
    """The result's name; `= 5]` (a value written by the model) names nothing."""
    return written if written and _LABEL.match(written) else None


def _loose_call(text: str, m: re.Match[str], final: bool) -> _Scan:
    """A call whose parentheses do not balance, ended by ``) = yN]`` on its line."""
    line_end = text.find("\n", m.end())
    if line_end < 0 and not final:
        return _Scan("wait")
    limit = line_end if line_end >= 0 else len(text)
    end = _LOOSE_END.search(text, m.end(), limit)
    if end is None:
        error = PlanError("The call's parenthesis is not closed.", "not_a_call")
        return _Scan("bad", limit, m.group(1), error=error)
    inner = text[m.end() : end.start()]
    return _Scan("call", end.end(), m.group(1), inner, _label(end.group(1)))


def _could_open(rest: str) -> bool:
    """Whether `rest` (from a ``[`` to the end of the text) may still become ``[FUNC ``."""
    return "[FUNC".startswith(rest.replace(" ", "").replace("\t", "").upper())


@dataclass
class CoAParser:
    """Incremental parser of a Chain-of-Abstraction reasoning (a :class:`PlanStream`).

    Feed it text deltas; it returns a task for each inline call once its ``]`` has
    streamed. The reasoning is never cut: ``done`` stays false until :meth:`finish`.

    Attributes:
        next_id: The id of the first call.
        round: The planning round, stamped on each task.
        max_tasks: Most calls run; later ones stay in the text unrun (a plan error).
        known_ids: Ids of earlier rounds' tasks.
    """

    next_id: int = 1
    round: int = 0
    max_tasks: int = 100
    known_ids: frozenset[int] = frozenset()
    text: str = ""
    done: bool = False
    thoughts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    join_id: int | None = None
    tasks: list[PlanTask] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._pos = 0
        self._labels: dict[str, int] = {}

    def feed(self, delta: str) -> list[PlanTask]:
        """Add streamed text; return the calls it completed."""
        if self.done or not delta:
            return []
        self.text += delta
        return self._scan(final=False)

    def finish(self) -> list[PlanTask]:
        """The stream ended: return the last calls (an unclosed one becomes an error)."""
        if self.done:
            return []
        out = self._scan(final=True)
        self.done = True
        return out

    def _scan(self, final: bool) -> list[PlanTask]:
        out: list[PlanTask] = []
        text = self.text
        while True:
            m = _OPEN.search(text, self._pos)
            if m is None:
                bracket = text.rfind("[", self._pos)
                keep = not final and bracket >= 0 and _could_open(text[bracket:])
                self._pos = bracket if keep else len(text)
                return out
            found = scan_call(text, m.end(), final)
            if found.kind == "wait":
                self._pos = m.start()
                return out
            task = self._task(m.start(), found)
            if task is not None:
                out.append(task)
            self._pos = found.end

    def _task(self, start: int, found: _Scan) -> PlanTask | None:
        written = self.text[start : found.end].strip()
        if len(self.tasks) >= self.max_tasks:
            if not any("more than" in e for e in self.errors):
                self.errors.append(
                    PlanError(
                        f"The reasoning has more than {self.max_tasks} calls; the later ones "
                        "were not run.",
                        "too_many_tasks",
                    )
                )
            self.spans.append(Span(start, found.end, None, found.tool, found.inner, found.label))
            return None
        task_id = self.next_id + len(self.tasks)
        task = self._parse(task_id, found, written)
        self.tasks.append(task)
        self.spans.append(Span(start, found.end, task_id, found.tool, found.inner, found.label))
        if found.label:  # a later call may reuse a name: it then means the newer result
            self._labels[found.label] = task_id
        return task

    def _parse(self, task_id: int, found: _Scan, written: str) -> PlanTask:
        base: dict[str, Any] = {"id": task_id, "tool": found.tool, "text": written}
        base["round"] = self.round
        if found.error is not None:
            return PlanTask(error=found.error, **base)
        earlier = set(self._labels.values()) | set(self.known_ids)
        try:
            args, kwargs = parse_arguments(
                found.inner,
                own_id=task_id,
                earlier=earlier,
                names=self._labels,
                dollar_refs=False,
            )
            undefined = _undefined_names([args, kwargs])
            if undefined:
                raise PlanLineError(
                    f"{written} uses {', '.join(undefined)}, which no earlier call defines.",
                    "bad_reference",
                )
        except PlanLineError as e:
            return PlanTask(error=e.error, **base)
        deps = sorted(set(iter_refs(args)) | set(iter_refs(kwargs)))
        return PlanTask(args=args, kwargs=kwargs, deps=deps, **base)


def _undefined_names(value: Any) -> list[str]:
    """Arguments that look like result names (``y3``) but name no earlier result."""
    if isinstance(value, str):
        return [value.strip()] if _LABEL_LIKE.match(value.strip()) else []
    if isinstance(value, dict) and "$ref" not in value and "$concat" not in value:
        return [n for v in value.values() for n in _undefined_names(v)]
    if isinstance(value, list):
        return [n for v in value for n in _undefined_names(v)]
    return []


# --------------------------------------------------------------------------- fill-in


def result_text(record: TaskRecord) -> str:
    """How a call's outcome reads inside the reasoning."""
    if record.observation is None:
        return "(not run)"
    text = record.observation
    if record.is_error and not record.skipped and not text.startswith("Error"):
        text = f"Error: {text}"
    return text


def _fill_words(text: str, values: Mapping[str, str]) -> str:
    """Replace each whole-word result name in `text`, in one pass."""
    if not values:
        return text
    words = "|".join(re.escape(n) for n in sorted(values, key=len, reverse=True))
    return re.sub(rf"(?<![\w$])(?:{words})(?!\w)", lambda m: values[m.group()], text)


def fill_in(text: str, records: Sequence[TaskRecord]) -> str:
    """The reasoning with every call's result (or error) written in place.

    ``[FUNC add(y1, 3) = y2]`` becomes ``[FUNC add(5, 3) = 8]``, and ``y2`` in later
    prose becomes ``8``. Names are matched as whole words, left to right, in one pass.
    """
    if not records:
        return text
    by_id = {r.id: r for r in records}
    parser = CoAParser(next_id=min(by_id), max_tasks=len(by_id))
    parser.feed(text)
    parser.finish()
    values: dict[str, str] = {}
    out: list[str] = []
    pos = 0
    for span in parser.spans:
        out.append(_fill_words(text[pos : span.start], values))
        record = by_id.get(span.task_id) if span.task_id is not None else None
        if record is None:
            out.append(_fill_words(text[span.start : span.end], values))
        else:
            value = result_text(record)
            out.append(f"[FUNC {span.tool}({_fill_words(span.inner, values)}) = {value}]")
            if span.label:
                values[span.label] = value
        pos = span.end
    out.append(_fill_words(text[pos:], values))
    return "".join(out)


# --------------------------------------------------------------------------- plain text

_WRITTEN = re.compile(r"(?:=|->)[ \t]*([^\]\n]*?)[ \t]*\]?$")


def plain(text: str) -> str:
    """`text` without ``[FUNC ...]`` markup: a call whose result is written in place
    (``[FUNC lookup("M25") = 188]``) becomes its result (``188``); one whose result is
    a name or missing becomes the call (``lookup("M25")``)."""
    parser = CoAParser()
    parser.feed(text)
    parser.finish()
    out: list[str] = []
    pos = 0
    for span in parser.spans:
        out.append(text[pos : span.start])
        written = _WRITTEN.search(text[span.start : span.end].rstrip())
        value = written.group(1).strip() if written else ""
        if not value or _LABEL.match(value):
            value = f"{span.tool}({span.inner})" if span.tool != "?" else ""
        out.append(value)
        pos = span.end
    out.append(text[pos:])
    return "".join(out)
