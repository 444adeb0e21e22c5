"""Verdicts on held tasks, checked the same way whatever surface brings them.

``POST /events``, an AG-UI ``resume``, an A2A reply, an MCP elicitation and the
OpenAI-compatible routes all hand a :class:`~llm_compiler.events.TaskApprovalResponse` to
:func:`check_task_verdict` before it is sent to the run. A verdict counts only for a task
held for approval now: any other (waiting for its inputs, running, finished, answered
before, unknown) is refused with a 409 that names the task's state, since the scheduler
would drop it and the client would wait for a call that never runs. An ``edit`` must fit
the tool's schema with the task's other arguments: otherwise a 422 names the fields and
the task stays held for a verdict that does fit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from workflows import Workflow

from llm_compiler.engine.scheduler import Book, fold, task_arguments, task_verdict
from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.events import TaskApprovalResponse
from llm_compiler.plan import PlanTask
from llm_compiler.serving.guard import BadRequest

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore

#: A task's state when a verdict may answer it.
HELD = "held for approval"


async def run_state(store: AbstractWorkflowStore, run_id: str | None) -> CompilerState | None:
    """The saved state of a compiler run, if there is one."""
    if run_id is None:
        return None
    try:
        state = await store.create_state_store(run_id, CompilerState).get_state()
    except Exception:  # no state saved yet, or not a compiler's: nothing waits
        return None
    return state if isinstance(state, CompilerState) else None


async def check_task_verdict(
    store: AbstractWorkflowStore,
    workflow: Workflow | None,
    run_id: str | None,
    event: TaskApprovalResponse,
) -> None:
    """Refuse `event` unless it answers a task of run `run_id` held for approval now
    (409, with the task's ``state``), and an edit unless it fits the tool (422, with the
    field ``errors``)."""
    state = await run_state(store, run_id)
    task = state.tasks.get(event.task_id) if state is not None else None
    if (
        state is None
        or task is None
        or event.run_id != state.run_id
        or task.round != event.round
        or not isinstance(workflow, LLMCompilerWorkflow)
    ):
        detail = f"Run {event.run_id!r} has no task {event.task_id} of round {event.round}."
        raise BadRequest(409, detail, {"state": "unknown"})
    book = fold(state, workflow.config.concurrency, rules=workflow.run_policies(state))
    where = task_state(state, book, task.id)
    if where != HELD:
        detail = f"Task {task.id} ({task.tool}) is not held for approval: it is {where}."
        raise BadRequest(409, detail, {"state": where, "task_id": task.id})
    if event.action == "edit":
        check_edit(workflow, state, task, event.args or {})


def verdict_for(approval_id: str, payload: Mapping[str, Any]) -> TaskApprovalResponse:
    """The verdict `payload` (``action``, ``args``, ``reason``) gives on the held task
    whose approval id (``run_id:round:task_id``) is `approval_id`; BadRequest 400 if
    either is malformed."""
    run_id, _, task_id = approval_id.rpartition(":")
    run_id, _, round = run_id.rpartition(":")
    fields = {k: payload[k] for k in ("action", "args", "reason") if k in payload}
    try:
        return TaskApprovalResponse.model_validate(
            {**fields, "run_id": run_id, "round": round, "task_id": task_id}
        )
    except ValidationError as e:
        where = ".".join(str(p) for p in e.errors()[0]["loc"])
        raise BadRequest(400, f"Invalid verdict for approval {approval_id!r}: {where}.") from None


def task_state(state: CompilerState, book: Book, task_id: int) -> str:
    """What task `task_id` is doing, in words (:data:`HELD` when a verdict may answer it)."""
    outcome = state.outcomes.get(task_id)
    if outcome is not None:
        return "skipped" if outcome.skipped else "failed" if outcome.is_error else "done"
    if task_id in book.held:
        return HELD
    if task_id in book.running:
        return "running"
    if task_id in book.queued:
        return "waiting for a slot"
    if task_id in book.blocked:
        return "waiting for its inputs"
    if task_id in book.failing:
        return "not going to run"
    if task_verdict(state, task_id) is not None:
        return "answered already"
    return "planned"


def check_edit(
    workflow: LLMCompilerWorkflow, state: CompilerState, task: PlanTask, edits: Mapping[str, Any]
) -> None:
    """Refuse (422) `edits` that name no argument of the task's tool, or with which the
    task's arguments do not fit the tool's schema."""
    tools = workflow.run_tools(state.run_id)
    tool = tools.get(task.tool) if tools is not None else workflow.tools.get(task.tool)
    schema = tool.metadata.fn_schema if tool is not None else None
    if schema is None:
        return
    errors = _unknown(schema, edits) or _invalid(schema, {**task_arguments(state, task), **edits})
    if errors:
        listed = "; ".join(f"{e['field']}: {e['message']}" for e in errors)
        detail = f"The edit does not fit {task.tool}, task {task.id} stays held: {listed}."
        raise BadRequest(422, detail, {"errors": errors, "task_id": task.id})


def _unknown(schema: type[BaseModel], edits: Mapping[str, Any]) -> list[dict[str, str]]:
    if schema.model_config.get("extra") == "allow":
        return []
    names = set(schema.model_fields)
    names |= {f.alias for f in schema.model_fields.values() if f.alias}
    known = ", ".join(sorted(names)) or "none"
    message = f"not an argument of this tool (it takes {known})"
    return [{"field": k, "message": message} for k in edits if k not in names]


def _invalid(schema: type[BaseModel], args: dict[str, Any]) -> list[dict[str, str]]:
    try:
        schema.model_validate(args)
    except ValidationError as e:
        return [
            {"field": ".".join(str(p) for p in err["loc"]) or "arguments", "message": err["msg"]}
            for err in e.errors()
        ]
    except Exception as e:  # noqa: BLE001 - a validator's own failure is a misfit too
        return [{"field": "arguments", "message": f"{type(e).__name__}: {e}"}]
    return []
