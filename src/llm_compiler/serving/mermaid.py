"""A run's plan DAG as a Mermaid flowchart, for notebooks and Markdown.

``to_mermaid(events)`` takes the events of one run, either the typed events of
``handler.stream_events()`` or the JSON envelopes the workflow server streams
(``{"type": "TaskResult", "value": {...}}``), and draws one subgraph per planning
round: a node per task (its line, coloured by state), edges for ``$N`` inputs, the
join, and a dotted edge from a round's join to the replan it asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

#: Task states, in the order a task goes through them.
STATES = ("planned", "running", "done", "error", "skipped")
_STYLES = {
    "planned": "fill:#f4f4f5,stroke:#a1a1aa,color:#3f3f46",
    "running": "fill:#dbeafe,stroke:#2563eb,color:#1e3a8a",
    "done": "fill:#dcfce7,stroke:#16a34a,color:#14532d",
    "error": "fill:#fee2e2,stroke:#dc2626,color:#7f1d1d",
    "skipped": "fill:#fef9c3,stroke:#ca8a04,color:#713f12,stroke-dasharray:4 3",
    "join": "fill:#ede9fe,stroke:#7c3aed,color:#4c1d95",
}
_MAX_LABEL = 60


@dataclass
class TaskNode:
    """One task of the drawn DAG."""

    id: int
    round: int
    label: str
    deps: list[int] = field(default_factory=list)
    state: str = "planned"
    duration: float = 0.0


@dataclass
class RunGraph:
    """The DAG of a run, folded from its events (see :func:`run_graph`)."""

    tasks: dict[int, TaskNode] = field(default_factory=dict)
    joins: dict[int, int | None] = field(default_factory=dict)
    """Round -> the id of its ``join()`` line (None until the plan is complete)."""
    replans: dict[int, str] = field(default_factory=dict)
    """New round -> the joiner's reason."""
    answer: str | None = None


def _envelope(event: Any) -> tuple[str, Mapping[str, Any]]:
    """(type name, fields) of a typed event or a server JSON envelope."""
    if isinstance(event, Mapping):
        value = event.get("value")
        return str(event.get("type", "")), value if isinstance(value, Mapping) else {}
    if isinstance(event, BaseModel):
        return type(event).__name__, event.model_dump(mode="json")
    return type(event).__name__, {}


def run_graph(events: Iterable[Any]) -> RunGraph:
    """Fold a run's events (typed or JSON envelopes) into its DAG with task states."""
    graph = RunGraph()
    for event in events:
        kind, value = _envelope(event)
        if kind == "PlanEvent":
            _add_plan(graph, value)
        elif kind == "TaskReady":
            node = graph.tasks.get(value.get("task_id"))  # type: ignore[arg-type]
            if node is not None and node.state == "planned":
                node.state = "running"
        elif kind == "TaskResult":
            node = graph.tasks.get(value.get("task_id"))  # type: ignore[arg-type]
            if node is not None:
                node.state = _result_state(value)
                node.duration = max(
                    0.0, float(value.get("finished_at", 0)) - float(value.get("started_at", 0))
                )
        elif kind == "ReplanEvent":
            graph.replans[int(value.get("round", 0))] = str(value.get("reason", ""))
        elif kind == "StopEvent":
            graph.answer = _answer(event, value)
    return graph


def _add_plan(graph: RunGraph, value: Mapping[str, Any]) -> None:
    round_ = int(value.get("round", 0))
    if value.get("replaces"):  # a plan edited before approval: the round's earlier one goes
        graph.tasks = {i: t for i, t in graph.tasks.items() if t.round != round_}
        graph.joins.pop(round_, None)
    graph.joins.setdefault(round_, None)
    for task in value.get("tasks") or []:
        if task.get("tool") == "join":
            graph.joins[round_] = int(task["id"])
            continue
        if int(task["id"]) in graph.tasks:
            continue
        text = str(task.get("text") or task.get("tool", "?"))
        node = TaskNode(int(task["id"]), round_, text, [int(d) for d in task.get("deps") or []])
        if task.get("error"):
            node.state = "error"
        graph.tasks[node.id] = node
    if value.get("complete") and value.get("join_id") is not None:
        graph.joins[round_] = int(value["join_id"])


def _result_state(value: Mapping[str, Any]) -> str:
    if value.get("skipped"):
        return "skipped"
    return "error" if value.get("is_error") else "done"


def _answer(event: Any, value: Mapping[str, Any]) -> str | None:
    result = getattr(event, "result", None) if not isinstance(event, Mapping) else None
    if result is None:
        result = value.get("result")
    if isinstance(result, Mapping):
        content = (result.get("response") or {}).get("content")
        if content is None:
            blocks = (result.get("response") or {}).get("blocks") or []
            content = "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping))
        return str(content)
    return None if result is None else str(result)


def _label(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > _MAX_LABEL:
        text = text[: _MAX_LABEL - 1] + "…"
    # Mermaid's own entity escapes: quotes would end the label.
    return text.replace("#", "#35;").replace('"', "#quot;").replace("<", "#lt;")


def to_mermaid(events: Iterable[Any], *, direction: str = "LR") -> str:
    """The run's DAG as Mermaid ``flowchart`` source, nodes styled by state.

    Args:
        events: One run's events: typed (``handler.stream_events()``) or the server's
            JSON envelopes (dicts with ``type`` and ``value``).
        direction: ``LR`` (inputs left of their users) or ``TD``.
    """
    graph = run_graph(events)
    lines = [f"flowchart {direction}"]
    rounds = sorted(set(graph.joins) | {t.round for t in graph.tasks.values()})
    edges: list[str] = []
    for r in rounds:
        lines.append(f'  subgraph round{r}["Round {r}"]')
        tasks = [t for t in graph.tasks.values() if t.round == r]
        for t in tasks:
            timing = f" · {t.duration:.2f}s" if t.duration else ""
            lines.append(f'    t{t.id}["{_label(t.label)}{timing}"]:::{t.state}')
            edges += [f"  t{d} --> t{t.id}" for d in t.deps if d in graph.tasks]
        lines.append(f'    join{r}(["join"]):::join')
        used = {d for t in tasks for d in t.deps}
        edges += [f"  t{t.id} --> join{r}" for t in tasks if t.id not in used]
        lines.append("  end")
        if r + 1 in graph.replans or r + 1 in rounds:
            reason = _label(graph.replans.get(r + 1, "replan"))
            edges.append(f'  join{r} -. "{reason}" .-> round{r + 1}')
    lines += edges
    if graph.answer is not None and rounds:
        lines.append(f'  answer[/"{_label(graph.answer)}"/]')
        lines.append(f"  join{rounds[-1]} --> answer")
    lines += [f"  classDef {name} {style}" for name, style in _STYLES.items()]
    return "\n".join(lines) + "\n"
