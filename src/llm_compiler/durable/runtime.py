"""The durable runtime: the in-memory workflow runtime, with a journal of the run's facts.

Runs execute on llama-index-workflows' own asyncio runtime. Durability is added at three
seams, none of them inside the engine:

- **State.** Each run's state store is an in-memory one whose writes queue the rows of
  what they add (:mod:`.facts`) to the :class:`~.journal.Journal`.
- **Steps.** A verdict on a held plan starts once the run's queued rows are committed
  (:meth:`~.journal.Journal.barrier`). A tool call that is not ``pure`` waits for the
  commit of the rows its run had queued once its plan line and its inputs' results were
  there (not for its siblings' results settled since), so a call run again after a crash
  has the same arguments and idempotency key; an ``at_most_once`` call also waits for its
  start's commit. The planner, the scheduler, the joiner and ``pure`` calls do not wait:
  what a crash takes from them before its commit (a row waits
  :data:`~.journal.LAZY_COMMIT` at most for one to start) they do again. Rows are
  committed in order, so the joiner's answer or replan verdict is never committed without
  the results it read; a crash before that commit asks the joiner again, on the results
  as resumed (a cut ``at_most_once`` call's is "outcome unknown").
- **Answers.** The run's ``StopEvent`` is published only once its answer is committed,
  and a request for a verdict (an ``InputRequiredEvent``) once the facts it rests on are.

A run is resumed by folding its rows into its state and sending the steps the events
that carry it on (:mod:`.recovery`). Which runs this process resumes, and when, is the
business of :mod:`.backend` (in your own process) and :mod:`.store` (served).
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from contextvars import ContextVar, copy_context
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from typing_extensions import override
from workflows import Context
from workflows.context.serializers import BaseSerializer
from workflows.context.state_store import InMemoryStateStore, StateStore, infer_state_type
from workflows.events import Event, InputRequiredEvent, StartEvent, StopEvent
from workflows.handler import WorkflowHandler
from workflows.plugins.basic import BasicRuntime
from workflows.runtime.runtime_decorators import (
    BaseExternalRunAdapterDecorator,
    BaseInternalRunAdapterDecorator,
    BaseRuntimeDecorator,
)
from workflows.runtime.types.internal_state import BrokerState
from workflows.runtime.types.named_task import NamedTask, PendingStart, PendingWorker
from workflows.runtime.types.plugin import (
    ExternalRunAdapter,
    InternalRunAdapter,
    Runtime,
    WaitForNextTaskResult,
)
from workflows.workflow import Workflow

from llm_compiler.durable.facts import Row, diff, fold
from llm_compiler.durable.journal import INCARNATION, Journal
from llm_compiler.durable.recovery import resume_events
from llm_compiler.engine.policy import BEFORE_CALL
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import TaskStarted

logger = logging.getLogger(__name__)

#: Finished runs whose state stays in memory for readers (older ones are folded from the
#: journal). The state of a run this process holds is never dropped before the run ends.
STATES_KEPT = 256
#: Steps that start without waiting for a commit: the scheduler only records facts; the
#: planner acts on the question (committed before a served start is answered) or on a
#: replan verdict, and the joiner on results: cut before their commit, the joiner is
#: asked again, on the results as resumed. What they write is committed after what they
#: read (commits are in order), and nothing they emit is shown before its commit.
UNGATED_STEPS = frozenset({"schedule", "plan", "join"})
#: Steps whose tool calls wait in the runtime's hook (:meth:`JournalRuntime.before_tool_call`)
#: for the facts of their task only.
CALL_GATED_STEPS = frozenset({"execute"})
_JOURNAL: ContextVar[Journal | None] = ContextVar("llmc_journal", default=None)
#: The idempotency key of the call whose start this context committed (one mark per call:
#: a second mark of a key is refused, :class:`~.journal.AlreadyStarted`).
_MARKED: ContextVar[str | None] = ContextVar("llmc_marked", default=None)


async def at_most_once() -> bool:
    """Inside a tool call of a durable run: commit that this call started, before its side
    effect. If a crash cuts the call, the resumed run does not call it again: the task's
    outcome is an error observation saying the outcome is unknown (the joiner, or a
    human, decides). Returns whether the mark was committed (False outside a durable
    run's tool call: nothing to do). :meth:`.Journal.started_without_result` lists the
    calls so cut.
    """
    from llm_compiler.tools.calls import idempotency_key

    journal, key = _JOURNAL.get(), idempotency_key()
    if journal is None or key is None:
        return False
    if _MARKED.get() == key:  # its policy marked this call's start already
        return True
    run_id, round, task = key.rsplit(":", 2)
    journal.put(run_id, Row("started", f"{round}:{task}", "{}"))
    await journal.barrier(run_id)
    _MARKED.set(key)
    return True


@dataclass(frozen=True)
class RunRequest:
    """A run asked of the runtime (the arguments of ``run_workflow``)."""

    run_id: str
    workflow: Workflow
    init_state: BrokerState
    start_event: StartEvent | None = None
    serialized_state: dict[str, Any] | None = None
    serializer: BaseSerializer | None = None


class JournaledStateStore(InMemoryStateStore[Any]):
    """A run's state in memory; each write queues the journal rows of what it adds."""

    def __init__(self, initial: BaseModel, journal: Journal, run_id: str) -> None:
        super().__init__(initial)
        self._journal, self._run_id = journal, run_id
        self.inputs: dict[int, asyncio.Future[None] | None] = {}
        """By task id: the commit holding what the run had queued once the task and its
        inputs' results were there (None: committed then)."""

    @override
    async def _write_state(self, state: BaseModel, storage: Any = None) -> None:
        if isinstance(state, CompilerState):
            record = self._memory_storage.load_sync()
            old = record.data if record is not None else None
            rows = diff(old if isinstance(old, CompilerState) else None, state)
            for row in rows:
                self._journal.put(self._run_id, row)
            if state.answer is None and any(row.kind == "llm" for row in rows):
                # A model call ended (a plan, a replan verdict): the costliest fact to redo
                # is committed at once; tools' results ride with the next commit. An
                # answer is committed by the barrier of its StopEvent, with the stream's end.
                self._journal.commit_soon()
            commit = self._journal.pending(self._run_id)
            for task_id, task in state.tasks.items():
                if task_id not in self.inputs and all(d in state.outcomes for d in task.deps):
                    self.inputs[task_id] = commit
        await super()._write_state(state, storage)


class _JournaledRun(BaseInternalRunAdapterDecorator):
    """A run's internal adapter: journaled state, steps gated on the commit of the facts
    they act on, the answer published once committed."""

    def __init__(self, decorated: InternalRunAdapter, runtime: JournalRuntime) -> None:
        super().__init__(decorated)
        self._runtime = runtime

    @override
    def get_state_store(self, namespace: tuple[str, ...] = ()) -> StateStore[Any] | None:
        if namespace or self._runtime.journal.stale(self.run_id):
            return super().get_state_store(namespace)
        return self._runtime.held_state(self.run_id)

    @override
    async def write_to_event_stream(self, event: Event) -> None:
        # What a client acts on stands first: the answer, and a request for a verdict (a
        # verdict must find its request on whichever worker runs the run next).
        if isinstance(event, (StopEvent, InputRequiredEvent)):
            await self._runtime.journal.barrier(self.run_id)
        await super().write_to_event_stream(event)

    @override
    async def wait_for_next_task(
        self, running: list[NamedTask], pending: list[PendingStart], timeout: float | None = None
    ) -> WaitForNextTaskResult:
        for start in pending:
            if isinstance(start, PendingWorker) and start.step_id.name not in UNGATED_STEPS:
                start.coro = self._gated(start.coro, start.step_id.name not in CALL_GATED_STEPS)
        return await super().wait_for_next_task(running, pending, timeout)

    async def _gated(self, step: Coroutine[Any, Any, Any], barrier: bool) -> Any:
        try:
            if barrier:
                await self._runtime.journal.barrier(self.run_id)
        except BaseException:
            step.close()
            raise
        _JOURNAL.set(self._runtime.journal)  # this step's task only
        BEFORE_CALL.set(self._runtime.before_tool_call)
        return await step


class _RunHandle(BaseExternalRunAdapterDecorator):
    """A run's external adapter, reading the run's journaled state store."""

    def __init__(self, decorated: ExternalRunAdapter, runtime: JournalRuntime) -> None:
        super().__init__(decorated)
        self._runtime = runtime

    @override
    def get_state_store(self, namespace: tuple[str, ...] = ()) -> StateStore[Any] | None:
        if namespace:
            return super().get_state_store(namespace)
        return self._runtime.state_of(self.run_id) or super().get_state_store(namespace)

    # The v2 compatibility calls of the in-memory runtime (ctx.is_running, handler.cancel()).
    def get_result_or_none(self) -> StopEvent | None:
        result: StopEvent | None = getattr(self._decorated, "get_result_or_none", lambda: None)()
        return result

    @property
    def is_running(self) -> bool:
        return bool(getattr(self._decorated, "is_running", True))

    def abort(self) -> None:
        abort: Callable[[], None] | None = getattr(self._decorated, "abort", None)
        if abort is not None:
            abort()


class JournalRuntime(BaseRuntimeDecorator):
    """The in-memory workflow runtime, journaling each run's facts (see the module).

    Args:
        journal: Where the facts go.
        decorated: The runtime it wraps (default: a new ``BasicRuntime``).
    """

    def __init__(self, journal: Journal, decorated: Runtime | None = None) -> None:
        super().__init__(decorated if decorated is not None else BasicRuntime())
        self.journal = journal
        self.states: dict[str, JournaledStateStore] = {}
        """The state of each run this process runs, until the run ends or leaves it."""
        self.finished_states: OrderedDict[str, JournaledStateStore] = OrderedDict()
        """The states of the newest :data:`STATES_KEPT` runs that ended here, for readers."""
        self.workflows: dict[str, Workflow] = {}
        self.on_resume: Callable[[str, bool], Coroutine[Any, Any, None]] | None = None
        """Called before a run is resumed, with whether it ran before (the server marks its
        stream)."""
        self._live: set[asyncio.Future[Any]] = set()
        self.calls_gate: asyncio.Future[None] | None = None
        """While set (a worker draining), tool calls not started yet wait on it: they
        start on the worker that takes the run over."""
        self.lease = asyncio.Event()
        """Set while this worker may start tool calls (its liveness lock is held)."""
        self.lease.set()

    # ------------------------------------------------------------------ wiring

    @override
    def track_workflow(self, workflow: Workflow) -> None:
        self.workflows[workflow.workflow_name] = workflow
        super().track_workflow(workflow)

    def state_store(self, run_id: str, state_type: type[BaseModel] | None) -> JournaledStateStore:
        """The state store of a run this process runs (one per run; a run that ended here
        and runs again takes its state back)."""
        store = self.states.get(run_id) or self.finished_states.pop(run_id, None)
        if store is None:
            initial = state_type() if state_type is not None else CompilerState()
            store = JournaledStateStore(initial, self.journal, run_id)
        self.states[run_id] = store
        return store

    def state_of(self, run_id: str) -> JournaledStateStore | None:
        """The run's state in memory, for a reader: a run running here, or one of the
        newest that ended here (None: fold it from the journal)."""
        store = self.states.get(run_id)
        if store is None and (store := self.finished_states.get(run_id)) is not None:
            self.finished_states.move_to_end(run_id)
        return store

    def held_state(self, run_id: str) -> JournaledStateStore:
        """The state of a run running here.

        Raises:
            RuntimeError: The run has no state here (its writes would not be journaled).
        """
        store = self.states.get(run_id)
        if store is None:
            raise RuntimeError(f"Run {run_id} runs here without its journaled state.")
        return store

    def retire(self, run_id: str) -> None:
        """`run_id` ended here: its state joins the bounded finished ones."""
        store = self.states.pop(run_id, None)
        if store is None:
            return
        self.finished_states[run_id] = store
        while len(self.finished_states) > STATES_KEPT:
            self.finished_states.popitem(last=False)

    @override
    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        return _JournaledRun(super().get_internal_adapter(workflow), self)

    @override
    def get_external_adapter(self, run_id: str) -> ExternalRunAdapter:
        return _RunHandle(super().get_external_adapter(run_id), self)

    @override
    def run_workflow(
        self,
        run_id: str,
        workflow: Workflow,
        init_state: BrokerState,
        start_event: StartEvent | None = None,
        serialized_state: dict[str, Any] | None = None,
        serializer: BaseSerializer | None = None,
    ) -> ExternalRunAdapter:
        """Run here, unless :meth:`route` sends the run elsewhere."""
        request = RunRequest(
            run_id, workflow, init_state, start_event, serialized_state, serializer
        )
        routed = self.route(request)
        return routed if routed is not None else self.run_here(request)

    def route(self, request: RunRequest) -> ExternalRunAdapter | None:
        """The one seam of the durable runtimes: where a run asked for now goes. None: run
        it here now (the default); else the adapter of the run where it goes instead (a
        run resumed by id, a run queued for another worker)."""
        return None

    def run_here(self, request: RunRequest) -> ExternalRunAdapter:
        """Start (or go on with) `request`'s run in this process, journaled."""
        run_id, workflow, start_event = request.run_id, request.workflow, request.start_event
        store = self.state_store(run_id, infer_state_type(workflow))
        seed = request.serialized_state
        if seed and seed.get("state_data") is not None:
            store.add_seed(seed, request.serializer or workflow.runtime.get_serializer(workflow))
        if start_event is not None:
            body = workflow.runtime.get_serializer(workflow).serialize(start_event)
            self.journal.put(run_id, Row("start", "", body))
            self.journal.commit_soon()
        epoch = self.journal.epoch(run_id)

        def start() -> ExternalRunAdapter:  # in a context of its own, which its tasks inherit
            if epoch is not None:
                INCARNATION.set((run_id, epoch))
            return super(JournalRuntime, self).run_workflow(
                run_id, workflow, request.init_state, start_event, seed, request.serializer
            )

        adapter = copy_context().run(start)
        self._watch(run_id, adapter, epoch)
        return _RunHandle(adapter, self)

    async def before_tool_call(self, started: TaskStarted) -> None:
        """Before a call that is not ``pure``: wait for the commit of what the run had
        queued once the task's plan line and its inputs' results were there (all it
        queued, for a task seen elsewhere); before an ``at_most_once`` call, also commit
        its start (a crash then resumes the task with "outcome unknown", the workflow's
        ``after_crash``). A ``pure`` call waits for nothing. Every tool call of a run on
        this runtime awaits it (:data:`~llm_compiler.engine.policy.BEFORE_CALL`)."""
        if self.calls_gate is not None:
            await asyncio.shield(self.calls_gate)
        if started.side_effect == "pure":
            return
        if not self.lease.is_set():  # this worker's liveness lock is away: start nothing
            logger.warning("Run %s waits for this worker's lock to start a call.", started.run_id)
            await self.lease.wait()
        store = self.state_of(started.run_id)
        if store is not None and started.task_id in store.inputs:
            await self.journal.settled(started.run_id, store.inputs[started.task_id])
        else:
            await self.journal.barrier(started.run_id)
        if started.side_effect == "at_most_once":
            key = f"{started.round}:{started.task_id}"
            self.journal.put(started.run_id, Row("started", key, "{}"))
            await self.journal.barrier(started.run_id)
            _MARKED.set(started.idempotency_key)

    def _watch(self, run_id: str, adapter: ExternalRunAdapter, epoch: int | None) -> None:
        """Call :meth:`finished` when this incarnation of `run_id` (started at `epoch`)
        ends, unless the run was claimed back here at another epoch meanwhile: the end of
        an incarnation stopped since is not the run's end here."""
        done = asyncio.ensure_future(adapter.get_result())
        self._live.add(done)

        def ended(future: asyncio.Future[Any]) -> None:
            self._live.discard(future)
            if not future.cancelled():
                future.exception()  # retrieved: the run's own awaiter reports it
            now = self.journal.epoch(run_id)
            if epoch is None or now is None or now == epoch:
                self.retire(run_id)
                self.finished(run_id, future)

        done.add_done_callback(ended)

    def finished(self, run_id: str, outcome: asyncio.Future[Any]) -> None:
        """Called when a run of this process ends (`outcome`: its result or error)."""

    def stop_here(self, run_id: str) -> None:
        """Stop `run_id` in this process at once: its tasks are cancelled, its state
        dropped (another worker holds it now, or it left memory)."""
        self.states.pop(run_id, None)
        self.finished_states.pop(run_id, None)
        try:
            adapter = self._decorated.get_external_adapter(run_id)
        except RuntimeError:  # not running here (any more)
            return
        abort: Callable[[], None] | None = getattr(adapter, "abort", None)
        if abort is not None:
            abort()

    # ------------------------------------------------------------------ resume

    async def resume(self, run_id: str, workflow: Workflow) -> WorkflowHandler:
        """Start `run_id` again from its journal on `workflow` (its facts folded into its
        state; the steps sent what carries it on). A run with no recorded state starts
        again from its recorded start event.

        Raises:
            LookupError: The journal holds no start of `run_id`.
        """
        rows = await self.journal.rows(run_id)
        serializer = workflow.runtime.get_serializer(workflow)
        if self.on_resume is not None:
            await self.on_resume(run_id, any(kind != "start" for kind, _, _ in rows))
        state = fold(rows)
        if state is None:
            start = next((body for kind, _, body in rows if kind == "start"), None)
            if start is None:
                raise LookupError(f"The journal holds no start of run {run_id}.")
            event = serializer.deserialize(start)
            return workflow.run(start_event=event, run_id=run_id)
        payload = InMemoryStateStore(state).to_dict(serializer)
        ctx: Context[Any] = Context.from_dict(
            workflow, {"state": payload, "is_running": True}, serializer
        )
        handler = workflow.run(ctx=ctx, run_id=run_id)
        limit = getattr(getattr(workflow, "config", None), "concurrency", None)
        policies = getattr(workflow, "run_policies", None)
        rules = policies(state) if policies is not None else None
        cut = {
            tuple(int(p) for p in key.split(":")) for kind, key, _ in rows if kind == "started"
        } - {tuple(int(p) for p in key.split(":")) for kind, key, _ in rows if kind == "result"}
        for event in resume_events(state, limit, cut, rules):
            handler.ctx.send_event(event)
        return handler
