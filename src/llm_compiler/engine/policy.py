"""The tool policies of one run, as the scheduler and the executor apply them.

:class:`RunPolicies` resolves each tool's :class:`~llm_compiler.tools.policy.ToolPolicy`
(the workflow's ``tool_policies`` by name, else the one declared on the tool, else the
default) and turns a call into the *slots* it needs while it runs: the run's global cap,
its tool's own limit, each named limit it shares (an MCP server's), and each resource
key (a slot of capacity one). A call starts only when every slot it needs has room, and
takes them all at once, so no call holds one slot while it waits for another: no
deadlock. When slots bind, the ready call with the longest chain of tasks behind it
goes first (:func:`remaining_paths`).

:func:`resume_in_flight` is what a durable runtime asks about a task that started before
a crash and has no recorded result: run it again (``pure``; ``idempotent`` with the same
idempotency key) or record "outcome unknown after a crash" (``at_most_once``). A runtime
learns which calls those are from :data:`BEFORE_CALL`, its hook for the steps it runs.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

from llama_index.core.tools import BaseTool

from llm_compiler.events import TaskResult, TaskStarted, call_key
from llm_compiler.plan import PlanTask
from llm_compiler.tools.policy import DEFAULT_POLICY, ToolPolicy, declared

Slot = tuple[str, int]
"""A slot a running call takes: (name, capacity)."""
TaskOrder = Literal["critical_path", "plan"]

BeforeCall = Callable[[TaskStarted], Awaitable[None]]
#: The runtime's hook, awaited before each try of a tool call in the steps it runs (set
#: in the step's task). A durable runtime commits there that an ``at_most_once`` call
#: started, so that a crash does not run it again: no wiring by the user.
BEFORE_CALL: ContextVar[BeforeCall | None] = ContextVar("llmc_before_call", default=None)

#: The observation of an ``at_most_once`` task in flight at a crash.
UNKNOWN_AFTER_CRASH = (
    "Error: the outcome of {tool} is unknown: the run stopped (a crash or a restart) while it "
    "ran, and it may have acted. It is not run again because its effect must not happen "
    "twice; check before repeating it."
)


@dataclass(frozen=True)
class RunPolicies:
    """The policies of a run's tools and the run's global cap."""

    limit: int | None = None
    policies: Mapping[str, ToolPolicy] = field(default_factory=dict)
    order: TaskOrder = "critical_path"

    @classmethod
    def build(
        cls,
        tools: Iterable[BaseTool],
        overrides: Mapping[str, ToolPolicy] | None = None,
        limit: int | None = None,
        order: TaskOrder = "critical_path",
    ) -> RunPolicies:
        """The policies of `tools`: `overrides` by name first, then each tool's own."""
        found: dict[str, ToolPolicy] = {}
        for tool in tools:
            name = tool.metadata.get_name()
            chosen = (overrides or {}).get(name) or declared(tool)
            if chosen is not None:
                found[name] = chosen
        return cls(limit, found, order)

    def of(self, tool: str) -> ToolPolicy:
        """The policy of the tool called `tool` (the default for an unknown name)."""
        return self.policies.get(tool, DEFAULT_POLICY)

    def shared_limit(self, name: str) -> int:
        """The capacity of a named limit: the smallest any tool declares."""
        return min(p.limits[name] for p in self.policies.values() if name in p.limits)

    def slots(self, task: PlanTask, kwargs: Mapping[str, Any]) -> tuple[Slot, ...]:
        """The slots a call of `task` with `kwargs` takes while it runs."""
        policy = self.of(task.tool)
        out: list[Slot] = [] if self.limit is None else [("*", self.limit)]
        if policy.max_concurrency is not None:
            out.append((f"tool:{task.tool}", policy.max_concurrency))
        out.extend((f"limit:{n}", self.shared_limit(n)) for n in sorted(policy.limits))
        out.extend((f"key:{k}", 1) for k in call_keys(policy, task.tool, kwargs))
        return tuple(out)


def call_keys(policy: ToolPolicy, tool: str, kwargs: Mapping[str, Any]) -> tuple[str, ...]:
    """A call's resource keys; a ``key_fn`` that fails gives one key for every call of
    the tool (they then never overlap, the safe side)."""
    try:
        return policy.keys(kwargs)
    except Exception:  # a user's key function: its failure must not stop the run
        return (f"{tool}:unkeyed",)


def remaining_paths(tasks: Mapping[int, PlanTask]) -> dict[int, int]:
    """For each task, the most tasks on a chain from it through its dependents (itself
    included), over the tasks known so far. A task depends only on earlier (lower) ids,
    so one pass from the highest id down sees every dependent first."""
    children: dict[int, list[int]] = {}
    for task in tasks.values():
        for dep in task.deps:
            children.setdefault(dep, []).append(task.id)
    depth: dict[int, int] = {}
    for tid in sorted(tasks, reverse=True):
        depth[tid] = 1 + max((depth.get(c, 1) for c in children.get(tid, ())), default=0)
    return depth


@dataclass(frozen=True)
class Resume:
    """What to do with a task that started before a crash and has no recorded result.

    ``rerun``: call the tool again, with ``idempotency_key`` (the same key the first
    call had). Otherwise ``result`` is the observation to record as its outcome.
    """

    rerun: bool
    idempotency_key: str
    result: TaskResult | None = None


def resume_in_flight(task: PlanTask, run_id: str, policy: ToolPolicy) -> Resume:
    """The outcome of `task`, in flight at a crash, by its tool's side-effect class:
    ``pure`` and ``idempotent`` run again (with the same idempotency key);
    ``at_most_once`` gets the error observation "outcome unknown after a crash"."""
    key = call_key(run_id, task.round, task.id)
    if policy.side_effect != "at_most_once":
        return Resume(rerun=True, idempotency_key=key)
    return Resume(rerun=False, idempotency_key=key, result=unknown_after_crash(task, run_id))


def unknown_after_crash(task: PlanTask, run_id: str) -> TaskResult:
    """The error observation of `task`, whose call a crash cut: its outcome is unknown."""
    now = time.time()
    return TaskResult(
        event_id=f"{call_key(run_id, task.round, task.id)}:unknown-after-crash",
        round=task.round,
        run_id=run_id,
        task_id=task.id,
        tool_name=task.tool,
        output=UNKNOWN_AFTER_CRASH.format(tool=task.tool),
        is_error=True,
        started_at=now,
        finished_at=now,
    )
