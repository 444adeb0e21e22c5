"""Which parts of a question a plan's calls left unanswered, read from the question's shape.

A question may list several things in parallel ("the delivery time of Dune, of Emma and of
Ulysses"). When a call's text argument is written in the question, and the question writes
another name in the same place (both names: runs of capitalized words), that name is a part
of the question the same call would answer. The answer names such parts when no call
answered them (:mod:`llm_compiler.dialects.selected_answer`); nothing here adds, requires or
merges a call. The same place is read from the question's characters, not its words (no
word of any language is listed here):

* **the same word before both**, in one sentence with one to :data:`MAX_BETWEEN` words
  between: ``in Oslo and in Madrid``, ``of Emma than of Beloved``, ``from Berlin to Paris
  or from Amsterdam to Porto`` (both arguments at once), not ``in Oslo in Fahrenheit``;
* **a pair ending the question after a pause**: ``, Saturn or Uranus?`` (one word between
  the two names, a comma or colon before the first, the question's end after the second).

A name is a run of capitalized words (:func:`~llm_compiler.dialects.grounding.name_runs`),
never the word that starts a sentence, and never one a call already takes. At most
:data:`MAX_COMPLETIONS` parts are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from llm_compiler.dialects.grounding import name_runs
from llm_compiler.plan import PlanTask, render_call

#: Most parts read from the question's shape.
MAX_COMPLETIONS = 4
#: Most words between two names in the same place (the later one's own word aside).
MAX_BETWEEN = 5
_TOKEN = re.compile(r"\S+")
_WORDS = re.compile(r"[\w'-]*\w[\w'-]*")
_END = re.compile(r"[?.!]*\s*(?:$|\n)")


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _left(question: str, start: int) -> str | None:
    """The word right before `start`, lower case; None where a sign stands between."""
    before = question[:start]
    if not before.endswith((" ", "\t")):
        return None
    tokens: list[str] = _TOKEN.findall(before)
    if not tokens or not re.fullmatch(r"[\w'-]+", tokens[-1]):
        return None
    return tokens[-1].lower()


def _occurrence(question: str, value: str) -> tuple[int, int] | None:
    match = re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", question)
    return match.span() if match else None


def _pair_after(question: str, end: int) -> int | None:
    """Where a name would start after `end` and one word: ``<one word> <name>``."""
    match = re.match(r"[ \t]+[\w'-]+[ \t]+", question[end:])
    return end + match.end() if match else None


def _paused(question: str, start: int) -> bool:
    return bool(re.search(r"[,:;][ \t]*$", question[:start]))


@dataclass(frozen=True)
class _Name:
    text: str
    start: int
    end: int


def _apart(question: str, a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two spans of one sentence have one to :data:`MAX_BETWEEN` words between
    them, besides the word before the later one."""
    first, second = sorted([a, b])
    between = question[first[1] : second[0]]
    return (
        not re.search(r"[.?!]\s", between) and 2 <= len(_WORDS.findall(between)) <= MAX_BETWEEN + 1
    )


def _candidates(question: str, value: str, names: Sequence[_Name]) -> list[str]:
    """Names written in the same place as `value` (see the module docstring)."""
    at = _occurrence(question, value)
    if at is None:
        return []
    left = _left(question, at[0])
    out = [
        n.text
        for n in names
        if left is not None
        and _apart(question, at, (n.start, n.end))
        and _left(question, n.start) == left
    ]
    pair = _pair_after(question, at[1]) if _paused(question, at[0]) else None
    if pair is not None:
        out += [
            n.text
            for n in names
            if n.start == pair and _END.match(question, n.end) and n.text not in out
        ]
    return out


def _literals(task: PlanTask) -> Iterator[tuple[int | str, str]]:
    for i, value in enumerate(task.args):
        if isinstance(value, str):
            yield i, value
    for key, value in task.kwargs.items():
        if isinstance(value, str):
            yield key, value


def parallel_calls(question: str, tasks: Sequence[PlanTask]) -> list[str]:
    """Calls (``tool(args)``) a first plan of `tasks` lacks for names `question` writes
    in the same place as one of their text arguments (see the module docstring)."""
    used = {_norm(v) for t in tasks for _, v in _literals(t)}
    spans = [_Name(question[a:b], a, b) for a, b in name_runs(question)]
    runs = {n.text for n in spans}
    names = [n for n in spans if not any(_overlaps(_norm(n.text), u) for u in used)]
    out: list[str] = []
    for task in tasks:
        if task.error is not None or task.deps:
            continue
        swaps = {k: _candidates(question, v, names) for k, v in _literals(task) if v in runs}
        for n in range(max((len(c) for c in swaps.values()), default=0)):
            args: list[Any] = list(task.args)
            kwargs = dict(task.kwargs)
            for key, found in swaps.items():
                if n < len(found):
                    if isinstance(key, int):
                        args[key] = found[n]
                    else:
                        kwargs[key] = found[n]
            call = render_call(task.model_copy(update={"args": args, "kwargs": kwargs}))
            if call not in out:
                out.append(call)
    return out[:MAX_COMPLETIONS]


def _overlaps(a: str, b: str) -> bool:
    return bool(a and b) and (f" {a} " in f" {b} " or f" {b} " in f" {a} ")
