"""Plan data: tasks, references between them, and their resolution.

Arguments are kept JSON-safe so plans travel in events and the workflow state:

* ``{"$ref": 3}`` is the result of task 3, passed with its own type;
* ``{"$concat": ["ratio of ", {"$ref": 1}, " to ", {"$ref": 2}]}`` is a string with results
  interpolated as text;
* ``{"$lit": {...}}`` is a dict the model wrote whose keys look like these markers
  (``search({"$ref": 9})``): data, never a reference. Only the parser makes references.

Everything else is a plain literal (str, int, float, bool, None, list, dict).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

REF = "$ref"
CONCAT = "$concat"
LIT = "$lit"
#: Keys a model-written dict may not carry bare: it would read as one of our markers.
MARKERS = frozenset({REF, CONCAT, LIT})
JOIN_TOOL = "join"
#: Ends a plan in the text format (after its ``join()`` line).
END_OF_PLAN = "<END_OF_PLAN>"


PlanErrorKind = Literal[
    "unknown_tool",
    "bad_arguments",
    "bad_reference",
    "not_a_call",
    "no_join",
    "too_many_tasks",
    "reused_id",
    "empty_plan",
    "too_large",
    "other",
]


class PlanError(str):
    """A plan or line error: its message (a ``str``) with the kind it was made with.

    Whoever finds the problem (a dialect's parser, the tool checks) says what kind it is;
    ``PlanTask.error_kind`` and ``PlanEvent.error_kinds`` carry the kind on from there.
    """

    kind: PlanErrorKind

    def __new__(cls, message: str, kind: PlanErrorKind) -> PlanError:
        error = super().__new__(cls, message)
        error.kind = kind
        return error

    def __getnewargs__(self) -> tuple[str, PlanErrorKind]:  # type: ignore[override]
        return str(self), self.kind


def error_kind(error: str) -> PlanErrorKind:
    """The kind `error` was made with (``other`` for an error made as plain text)."""
    return error.kind if isinstance(error, PlanError) else "other"


def kinds_given(data: Any, errors: str, kinds: str) -> Any:
    """`data` (a model's input) with the kinds of its `errors` field in `kinds`, unless
    given: the kinds the errors were made with (a validator's helper)."""
    if not isinstance(data, dict) or data.get(kinds) is not None or errors not in data:
        return data
    value = data[errors]
    if isinstance(value, list):
        return {**data, kinds: [error_kind(e) for e in value]}
    return {**data, kinds: None if value is None else error_kind(value)}


class PlanTask(BaseModel):
    """One numbered line of a plan, parsed.

    Attributes:
        id: The task number the planner gave (unique across all rounds of a run).
        tool: The tool name (``join`` for the join marker).
        args: Positional arguments, with references.
        kwargs: Keyword arguments, with references; after validation, all arguments
            are bound here by parameter name.
        deps: Ids of the tasks this one needs.
        thought: The ``Thought:`` the planner wrote before the line, if any.
        text: The line as the planner wrote it.
        error: Why the line cannot run (parse, unknown tool, bad arguments,
            bad reference); such a task becomes an error observation.
        error_kind: The kind of `error`.
        round: The planning round (0 for the first plan).
    """

    id: int
    tool: str
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    deps: list[int] = Field(default_factory=list)
    thought: str | None = None
    text: str = ""
    error: str | None = None
    round: int = 0

    error_kind: PlanErrorKind | None = None
    """What is wrong with the line, as a kind (given where the error was made; ``other``
    for an error given as plain text); None if nothing."""

    @model_validator(mode="before")
    @classmethod
    def _error_kind(cls, data: Any) -> Any:
        return kinds_given(data, "error", "error_kind")

    def failed(self, error: PlanError) -> PlanTask:
        """This task with `error` (and its kind): it will not run."""
        return self.model_copy(update={"error": str(error), "error_kind": error.kind})

    @property
    def is_join(self) -> bool:
        """Whether this is the ``join()`` marker that ends a plan."""
        return self.tool == JOIN_TOOL


def ref(task_id: int) -> dict[str, int]:
    """A reference to the result of `task_id`."""
    return {REF: task_id}


def is_ref(value: Any) -> bool:
    """Whether `value` is a reference made by :func:`ref`."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(REF), int)


def is_concat(value: Any) -> bool:
    """Whether `value` is a string template with interpolated references."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(CONCAT), list)


def literal(value: dict[str, Any]) -> dict[str, Any]:
    """`value` (a model-written dict) escaped if its keys collide with our markers."""
    return {LIT: value} if MARKERS.intersection(value) else value


def is_literal(value: Any) -> bool:
    """Whether `value` is a model-written dict escaped by :func:`literal`."""
    return isinstance(value, dict) and len(value) == 1 and isinstance(value.get(LIT), dict)


def iter_refs(value: Any) -> Iterator[int]:
    """Yield every task id referenced anywhere inside `value`.

    An escaped literal dict is never a reference itself; its values (which the parser
    converted) may hold references.
    """
    if is_literal(value):
        yield from iter_refs(list(value[LIT].values()))
    elif is_ref(value):
        yield value[REF]
    elif isinstance(value, dict):
        for item in value.values():
            yield from iter_refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from iter_refs(item)


def as_text(value: Any) -> str:
    """How a result reads when interpolated into a string."""
    if isinstance(value, str):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)


def resolve(value: Any, results: Mapping[int, Any]) -> Any:
    """Replace references in `value` with the results they name.

    A whole reference keeps the result's type; references inside a template are
    interpolated as text; an escaped literal dict becomes the dict the model wrote.
    `results` must hold every referenced id.
    """
    if is_literal(value):
        return {k: resolve(v, results) for k, v in value[LIT].items()}
    if is_ref(value):
        return results[value[REF]]
    if is_concat(value):
        return "".join(as_text(results[p[REF]]) if is_ref(p) else str(p) for p in value[CONCAT])
    if isinstance(value, dict):
        return {k: resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, results) for v in value]
    return value


def render_value(value: Any) -> str:
    """Render an argument back in plan syntax (``$3`` for references)."""
    if is_literal(value):
        return render_value(value[LIT])
    if is_ref(value):
        return f"${value[REF]}"
    if is_concat(value):
        inner = "".join(f"${{{p[REF]}}}" if is_ref(p) else str(p) for p in value[CONCAT])
        return repr(inner)
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {render_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def resolve_kwargs(kwargs: Mapping[str, Any], results: Mapping[int, Any]) -> dict[str, Any]:
    """Resolve each argument (the mapping of names itself is never a reference)."""
    return {k: resolve(v, results) for k, v in kwargs.items()}


def render_call(task: PlanTask) -> str:
    """Render a task as ``tool(arg, name=value)``."""
    parts = [render_value(a) for a in task.args]
    parts += [f"{k}={render_value(v)}" for k, v in task.kwargs.items()]
    return f"{task.tool}({', '.join(parts)})"
