"""LLMCompilerWorkflow: plan a DAG of tool calls, run each as soon as its inputs exist, join.

Steps and events::

    CompilerStartEvent | ReplanEvent -> plan -> PlanEvent (streamed, one per completed line)
    PlanEvent | TaskResult -> schedule -> TaskReady (inputs done) | TaskResult (cannot run)
                                       -> JoinEvent (plan complete, every task settled)
    TaskReady -> execute -> TaskResult
    JoinEvent -> join -> StopEvent(CompilerOutput) | ReplanEvent

Each step is short and delegates: the planner (:mod:`.planner`), the scheduler's pure core
(:mod:`.scheduler`), the events made from the facts (:mod:`.dispatch`), the executor
(:mod:`.executor`) and the joiner's format (via the plan dialect of :mod:`..dialects`).

The run's state holds facts only (:mod:`.state`), and every step can run again after a
crash with its own writes already committed, finding them and doing the same: the start
is idempotent by run id, the scheduler journals the events it took and derives its
bookkeeping from that journal, the plan and join steps return what they recorded. The
scheduler runs with one worker; it joins when the facts say the round's plan is complete
and every task of it settled (a fold of the state, so a run rebuilt from its facts joins
as it would have).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.objects import ObjectRetriever
from llama_index.core.tools import BaseTool
from workflows import Context, Workflow, step
from workflows.events import StopEvent
from workflows.handler import WorkflowHandler

from llm_compiler._upstream import KnownSteps
from llm_compiler.config import MAX_PARALLEL_TOOLS, CompilerConfig, make_config, split_config
from llm_compiler.dialects.base import DirectAnswer, ForcedJoin, JoinerDecision, PlanDialect
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.engine import memory as chat_memory
from llm_compiler.engine.cache import CacheStore, ResultCache
from llm_compiler.engine.dispatch import (
    Calls,
    approval_request,
    compiled,
    emit,
    fan_in,
    not_run,
    prepare,
    ready_event,
    replan_event,
    return_direct,
    verdict_of,
)
from llm_compiler.engine.executor import OnAttempt, run_task
from llm_compiler.engine.llm import (
    Metered,
    constrained_for,
    default_llm,
    is_chat,
    metered_call,
    require_llm,
)
from llm_compiler.engine.plan_cache import PlanCache
from llm_compiler.engine.planner import Planner, TokenStream, parse_plan_text, publish
from llm_compiler.engine.policy import (
    BEFORE_CALL,
    Resume,
    RunPolicies,
    resume_in_flight,
    unknown_after_crash,
)
from llm_compiler.engine.replan import failed_tasks, replan_reason
from llm_compiler.engine.runs import RunRegistry, RunTools, StartedCalls
from llm_compiler.engine.scheduler import (
    Books,
    Decision,
    facts_of,
    fold,
    runnable,
    with_facts,
)
from llm_compiler.engine.speculation import Speculation, predicted
from llm_compiler.engine.state import CompilerState, round_records
from llm_compiler.engine.summary import CompilerOutput, round_summary, summarize
from llm_compiler.errors import ConfigurationError, RunError
from llm_compiler.events import (
    AwaitingApproval,
    CompiledPlan,
    CompilerStartEvent,
    JoinEvent,
    PlanApprovalRequest,
    PlanApprovalResponse,
    PlanEvent,
    ReplanEvent,
    TaskApprovalResponse,
    TaskCut,
    TaskReady,
    TaskResult,
    TaskStarted,
)
from llm_compiler.logs import run_context
from llm_compiler.plan import PlanTask
from llm_compiler.tools import ToolLike, ToolSet, tool_map
from llm_compiler.tools.policy import ToolPolicy
from llm_compiler.tracing import Tracer, price_table
from llm_compiler.tracing.metrics import (
    count_run,
    record_outcome_unknown,
    record_task,
    record_verdict,
)
from llm_compiler.tracing.spans import Active, StepSpans
from llm_compiler.tracing.usage import LLMCallUsage, tokenizer_loaded

__all__ = ["MAX_PARALLEL_TOOLS", "LLMCompilerWorkflow"]


@dataclass
class JoinVerdict:
    """The joiner's decision on a round, and the calls it took to make it."""

    decision: JoinerDecision
    calls: list[LLMCallUsage]


class LLMCompilerWorkflow(KnownSteps, Workflow):
    """The LLMCompiler agent as a LlamaIndex workflow.

    ``await wf.run(user_msg=...)`` returns a :class:`~llm_compiler.engine.summary.CompilerOutput`
    (a llama-index ``AgentOutput`` whose ``str()`` is the answer, with a typed
    ``summary``). One instance serves any number of concurrent runs: all run data lives
    in the run's context (see :class:`~llm_compiler.engine.state.CompilerState`).

    Args:
        tools: llama-index tools or plain callables (sync ones run in a thread pool).
        llm: Any llama-index LLM; chat models get messages, completion models
            (``is_chat_model=False``) one few-shot prompt. Default: ``Settings.llm``.
        config: Options and limits (:class:`~llm_compiler.config.CompilerConfig`);
            keyword arguments named like its fields (``max_replans=2``) override it.
        dialect: The plan format (default: :class:`LLMCompilerDialect`).
        tool_retriever: Chooses extra tools per question.
        planner_examples: Few-shot plans of the default dialect (``None``: generated
            from the tools, or built-in; ``""``: none).
        joiner_examples: Few-shot joiner replies of the default dialect (``None``:
            built-in; ``""``: none).
        name: Shown as ``current_agent_name`` on streamed tokens and in the output.
        timeout: The workflow's own timeout in seconds (None: none).
        tool_context: Passed to tools that take a ``Context`` (default: the run's own).
        system_prompt: Extra instructions put before the planner's and joiner's own.
        result_cache: Where results of cacheable calls are kept between runs (default:
            the process's shared memory store; see :mod:`.cache`).
    """

    def __init__(
        self,
        tools: Sequence[ToolLike] = (),
        llm: LLM | None = None,
        *,
        config: CompilerConfig | None = None,
        dialect: PlanDialect | None = None,
        tool_retriever: ObjectRetriever[BaseTool] | None = None,
        planner_examples: str | None = None,
        joiner_examples: str | None = None,
        name: str = "llm_compiler",
        timeout: float | None = 600.0,
        tool_context: Any = None,
        system_prompt: str | None = None,
        result_cache: CacheStore | None = None,
        **options: Any,
    ) -> None:
        overrides = split_config(options)
        require_llm(llm)
        super().__init__(timeout=timeout, **options)
        self._dispatcher = StepSpans(self._dispatcher)  # type: ignore[assignment]  # a proxy
        self.config = make_config(config, overrides)
        if not tools and tool_retriever is None:
            raise ConfigurationError("Give tools=[...] or a tool_retriever.")
        if dialect is not None and (planner_examples is not None or joiner_examples is not None):
            raise ConfigurationError("Give examples to the dialect, not beside dialect=.")
        self.tools = tool_map(tools)
        self.llm = llm or default_llm()
        default = LLMCompilerDialect(planner_examples, joiner_examples)
        self.dialect: PlanDialect = default if dialect is None else dialect
        self.tool_retriever = tool_retriever
        self.name = name
        self.tool_context = tool_context
        self.system_prompt = system_prompt
        self._tracer = Tracer(name, enabled=self.config.tracing)
        prices = price_table(self.config.prices)
        self._planner = Planner(self.llm, self.dialect, self.config, name, self._tracer, prices)
        self._runs = RunRegistry()
        self._books = Books(self.config.concurrency, rules=self._rules)
        self.retry_sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
        """Waits a retry's backoff (tests put a recorder here: no real sleeps)."""
        self.before_tool_call: Callable[[TaskStarted], Awaitable[None]] | None = None
        """Awaited before each try of a tool call, after the runtime's own hook (a durable
        runtime's records that an ``at_most_once`` call started; see :meth:`after_crash`)."""
        self._run_tools = RunTools()
        self._calls = Calls()
        self._started_calls = StartedCalls()
        self._results = ResultCache(result_cache)
        self._owner = f"workflow:{uuid.uuid4().hex}"
        self._plans = PlanCache()
        self._speculation = Speculation()

    @property
    def result_cache(self) -> CacheStore:
        """Where results of cacheable calls are kept between runs (settable; see
        :mod:`.cache`)."""
        return self._results.store

    @result_cache.setter
    def result_cache(self, store: CacheStore) -> None:
        self._results.store = store

    @property
    def cache_owner(self) -> str:
        """Whose cached results this workflow's calls are served: its ``cache_namespace``,
        else this object's own (see :mod:`.cache`)."""
        namespace = self.config.cache_namespace
        return self._owner if namespace is None else f"namespace:{namespace}"

    def run(
        self, ctx: Context | None = None, start_event: Any = None, **kwargs: Any
    ) -> WorkflowHandler:
        """Start a run (see ``Workflow.run``); cancelling its awaiter cancels the run.

        ``asyncio.wait_for(handler, t)`` timing out, or ``task.cancel()`` on a task that
        awaits the handler, ends the run; every tool it was running is cancelled then
        (see :mod:`.runs`: llama-index-workflows alone leaves some running). A new question
        on a context supersedes its last run: that run's late events (a cancelled turn's
        tools finishing) are ignored from here on, before the new run has even started.
        """
        new_turn = ctx is None or not ctx.is_running
        run_id, start_event = self._runs.prepare(ctx, start_event, kwargs)
        # The run's span, and its id on log lines: its steps inherit both.
        with self._tracer.start_run(run_id), run_context(run_id):
            handler = super().run(ctx, start_event, **kwargs)
        self._tracer.watch(handler, run_id)
        self._runs.started(handler, run_id, new_turn)
        count_run(handler, run_id)
        return handler

    def tool_calls_in_flight(self) -> set[asyncio.Task[Any]]:
        """The tasks running a tool call of this workflow now (every run)."""
        return self._runs.calls_in_flight()

    def _rules(self, state: CompilerState) -> RunPolicies:
        """The policies of the run's tools (the workflow's own if this process does not
        hold the run's tool set), its cap and task order."""
        known = self._run_tools.known(state.run_id)
        tools = known if known is not None else self.tools.values()
        return RunPolicies.build(
            tools, self.config.tool_policies, self.config.concurrency, self.config.task_order
        )

    def run_policies(self, state: CompilerState) -> RunPolicies:
        """The policies, cap and task order the run of `state` is scheduled under (what a
        runtime that folds the run's journal must fold it with)."""
        return self._rules(state)

    def policy_of(self, state: CompilerState, tool: str) -> ToolPolicy:
        """The policy the run of `state` applies to `tool`."""
        return self._rules(state).of(tool)

    def after_crash(self, state: CompilerState, task_id: int) -> Resume:
        """What to do with task `task_id` of `state`'s run, started before a crash with no
        result recorded: run it again (``pure``, ``idempotent``: with the same
        idempotency key), or record the returned "outcome unknown" error observation
        (``at_most_once``). For a durable runtime resuming the run."""
        task = state.tasks[task_id]
        return resume_in_flight(task, state.run_id, self.policy_of(state, task.tool))

    async def warmed(self) -> None:
        """Wait until the embedded model has read the planner's prompt again after the
        last answer (see :meth:`~llm_compiler.engine.planner.Planner.warm`): a question
        asked then starts its plan without reading the instructions and examples."""
        await self._planner.warmed()

    def _stale(self, ev: Any, state: CompilerState) -> bool:
        """Whether `ev` is a late event of an earlier run on this context."""
        return ev.run_id != state.run_id or self._runs.retired(ev.run_id)

    # Read-only views of the configuration, as attributes of earlier releases.
    max_replans = property(lambda self: self.config.max_replans)
    max_concurrency = property(lambda self: self.config.concurrency)
    tool_timeout = property(lambda self: self.config.tool_timeout)
    max_tasks = property(lambda self: self.config.max_tasks)

    # ------------------------------------------------------------------ planner

    @step
    async def plan(
        self, ctx: Context[CompilerState], ev: CompilerStartEvent | ReplanEvent
    ) -> PlanEvent | PlanApprovalRequest | StopEvent | None:
        """Stream the planner LLM and emit tasks as their lines complete.

        In ``plan_only`` mode the run ends with the compiled plan; in ``approve`` mode
        the plan is held and a :class:`PlanApprovalRequest` asks for a verdict.
        """
        if isinstance(ev, CompilerStartEvent):
            await self._begin(ctx, ev)
        state = await self._state(ctx)
        if isinstance(ev, ReplanEvent) and (self._stale(ev, state) or ev.round != state.round):
            return None  # a late event of an earlier, cancelled run on this context
        if state.held is not None and state.held.round == state.round:
            # Made before, waits for a verdict: ask again.
            return approval_request(state.held, self._rules(state))
        tools = await self._tools(state)
        context = self._planner.context(state, tools, self._prompt(state), self._constrained())
        self._tracer.start_round(state.run_id, state.round)
        final = self._from_plan_cache(ctx, state, tools, context)
        if final is None:
            self._speculate(ctx, state, tools, context)
            final = await self._planner.plan(ctx, state, tools, context)
        ctx.write_event_to_stream(final)
        if state.mode == "run":
            return final  # the scheduler records it, with the planner call that made it
        await self._hold(ctx, final, approve=state.mode == "approve")
        rules = self._rules(state)
        if state.mode == "plan_only":
            return StopEvent(result=compiled(final, rules))
        return approval_request(final, rules)

    def _from_plan_cache(
        self, ctx: Context[CompilerState], state: CompilerState, tools: ToolSet, context: Any
    ) -> PlanEvent | None:
        """The run's first plan filled from a template (``cache_plans``: a fresh question
        of a shape answered before), its tasks sent to the scheduler; else None."""
        if not self.config.cache_plans:
            return None
        effects = self.config.cache_plans_with_effects
        plan = self._template_plan(state, tools, context, effects)
        if plan is None:
            return None
        plan = plan.model_copy(update={"run_id": state.run_id})
        publish(ctx, PlanEvent(round=plan.round, tasks=plan.tasks, run_id=plan.run_id))
        return plan

    def _template_plan(
        self, state: CompilerState, tools: ToolSet, context: Any, effects: bool
    ) -> PlanEvent | None:
        """The plan a kept template gives the run's first round (a fresh question only;
        `effects`: a template calling tools that are not ``pure`` too)."""
        if state.round or state.mode != "run" or state.transcript:
            return None
        parse = partial(parse_plan_text, self.dialect, context, tools=tools)
        rules, name = self._rules(state), self.dialect.name
        return self._plans.plan_for(state.question, tools, rules, name, parse, effects)

    def _speculate(
        self, ctx: Context[CompilerState], state: CompilerState, tools: ToolSet, context: Any
    ) -> None:
        """Start the calls a template predicts while the planner writes (``speculate``)."""
        if not (self.config.speculate and self.config.cache_results):
            return
        plan = self._template_plan(state, tools, context, effects=True)  # starts pure calls only
        if plan is not None:
            calls = predicted(plan, state.run_id, tools, self._rules(state))
            start = partial(self._cached_call, ctx, state.run_id)
            self._speculation.start(state.run_id, calls, start)

    async def _cached_call(
        self,
        ctx: Context[CompilerState],
        run_id: str,
        ready: TaskReady,
        tool: BaseTool | None,
        policy: ToolPolicy,
        on_attempt: OnAttempt | None = None,
    ) -> TaskResult:
        """`ready`'s call, through the result cache (cancelled if the run fails)."""
        context = ctx if self.tool_context is None else self.tool_context
        enabled = self.config.cache_results
        call = partial(
            run_task,
            ready,
            tool,
            timeout=self.config.tool_timeout,
            context=context,
            max_chars=self.config.max_result_chars,
            policy=policy,
            sleep=self.retry_sleep,
            on_attempt=on_attempt,
        )
        with self._runs.tool_call(run_id):
            owner = self.cache_owner
            return await self._results.run(run_id, ready, tool, policy, call, enabled, owner)

    async def _hold(self, ctx: Context[CompilerState], plan: PlanEvent, approve: bool) -> None:
        """Record, in one write, a plan no scheduler takes now: the planner call that made
        it and, in ``approve`` mode, the plan itself, waiting for a verdict."""
        async with ctx.store.edit_state() as s:
            if plan.llm_call is not None:
                s.llm_calls = [*s.llm_calls, plan.llm_call]
            if approve:
                s.held, s.verdict = plan, None

    @step
    async def review(
        self, ctx: Context[CompilerState], ev: PlanApprovalResponse
    ) -> PlanEvent | StopEvent | None:
        """Run the held plan as approved or edited, or end the run if it was rejected.

        The first verdict on a plan is the one that counts: it is recorded, and a step
        run again (or a second response) acts on the recorded verdict. An edited plan is
        streamed as a complete ``PlanEvent`` with ``replaces=True``: it replaces the plan
        streamed for its round before (whose task ids it may reuse).
        """
        state = await self._state(ctx)
        held = state.held
        if held is None or held.round != state.round or state.answer is not None:
            return None  # no plan is waiting (a late response)
        if (ev.run_id, ev.round) != (held.run_id, held.round):
            return None  # it answers another plan (late, duplicate or forged)
        verdict = state.verdict or verdict_of(ev)
        if verdict.action == "reject":
            reason = verdict.reason
            answer = f"The plan was rejected{': ' + reason if reason else '.'}"
            return StopEvent(result=await self._finish(ctx, state, answer, verdict=verdict))
        if state.verdict is None:
            async with ctx.store.edit_state() as s:
                s.verdict = verdict
        plan = self._approved(state, await self._tools(state), held, verdict)
        if verdict.action == "edit":
            ctx.write_event_to_stream(plan)
        if plan.tasks:
            publish(ctx, PlanEvent(round=plan.round, tasks=plan.tasks, run_id=plan.run_id))
        return plan

    def _approved(
        self, state: CompilerState, tools: ToolSet, held: PlanEvent, verdict: PlanApprovalResponse
    ) -> PlanEvent:
        """The plan to run: the held one, or the edited text parsed and checked.

        A new event each time: if the scheduler took this plan before (a second
        response), it adds nothing and decides nothing. Its planner call is recorded.
        """
        if verdict.action != "edit":
            return held.model_copy(update={"event_id": uuid.uuid4().hex, "llm_call": None})
        context = self._planner.context(state, tools, self._prompt(state), False)
        plan = parse_plan_text(self.dialect, context, verdict.plan_text or "", tools)
        return plan.model_copy(update={"run_id": state.run_id, "replaces": True})

    async def compile_plan(self, user_msg: str, **kwargs: Any) -> CompiledPlan:
        """The plan for `user_msg`, compiled and checked but not run."""
        result: CompiledPlan = await self.run(user_msg=user_msg, mode="plan_only", **kwargs)
        return result

    async def _begin(self, ctx: Context[CompilerState], ev: CompilerStartEvent) -> None:
        """Set up a run: question, conversation, memory and the tools it may use.

        Idempotent by run id: a run whose start step runs again (after a crash) keeps
        the state it has, its tasks and results included.
        """
        state = await ctx.store.get_state()
        run_id = ev.compiler_run_id or uuid.uuid4().hex
        if state.run_id == run_id and state.question:
            return
        question = ev.user_msg
        if isinstance(question, ChatMessage):
            question = question.content or ""
        if not question or not question.strip():
            raise ConfigurationError("run() needs a non-empty user_msg.")
        memory = ev.memory if ev.memory is not None else state.memory
        if memory is None:  # its tokenizer loads from disk the first time: not on the loop
            history = list(state.transcript)
            new_memory = partial(ChatMemoryBuffer.from_defaults, chat_history=history)
            memory = new_memory() if tokenizer_loaded() else await asyncio.to_thread(new_memory)
        if ev.chat_history is not None:
            await memory.aset(list(ev.chat_history))
        history = await chat_memory.read(memory)
        await chat_memory.remember(memory, ChatMessage(role=MessageRole.USER, content=question))
        toolset = await self._toolset(question)
        self._tracer.begin(ev.compiler_run_id or "", question, self.dialect.name)
        self._run_tools.put(run_id, toolset)
        # A new question starts a fresh DAG; the conversation carries what came before.
        await ctx.store.set_state(
            CompilerState(
                run_id=run_id,
                mode=ev.mode,
                question=question,
                transcript=list(history),
                tool_names=toolset.names,
                memory=memory,
            )
        )

    async def _toolset(self, question: str, names: Sequence[str] | None = None) -> ToolSet:
        """This run's tools: the workflow's own plus the retriever's choice for `question`
        (of `names` only, if given: the retriever is asked only for tools not our own)."""
        retrieved: list[BaseTool] = []
        ours = names is not None and set(names) <= set(self.tools)
        if self.tool_retriever is not None and not ours:
            retrieved = list(await self.tool_retriever.aretrieve(question))
        toolset = ToolSet.build(self.tools, retrieved)
        if names is not None:  # a resumed run keeps the tools it was planned with
            toolset = ToolSet({n: t for n, t in toolset.by_name.items() if n in set(names)})
        return toolset

    async def _state(self, ctx: Context[CompilerState]) -> CompilerState:
        """The committed state (a copy): a read, nothing more."""
        return await ctx.store.get_state()

    async def _tools(self, state: CompilerState) -> ToolSet:
        """The run's tools, as chosen at its start (their names are ``tool_names``).

        A durable store keeps no live objects: the tool set is kept per run in this
        process, or, in a process that resumes the run, looked up once by those names
        (the retriever's tools by asking it again: one call).
        """
        question, names = state.question, list(state.tool_names)
        return await self._run_tools.get(state.run_id, lambda: self._toolset(question, names))

    def run_tools(self, run_id: str) -> ToolSet | None:
        """The tools run `run_id` of this instance uses (None if this process has none)."""
        return self._run_tools.known(run_id)

    def _prompt(self, state: CompilerState, last_round: bool = False) -> PromptContext:
        budget = self.config.max_prompt_chars
        # Each observation gets its share of the prompt's budget for earlier rounds.
        share = budget // max(1, 2 * len(state.outcomes))
        return PromptContext(
            question=state.question,
            history=state.transcript,
            rounds=round_records(state, max(200, min(self.config.max_observation_chars, share))),
            max_history_chars=budget,
            system_prompt=self.system_prompt,
            chat=is_chat(self.llm),
            last_round=last_round,
            constrained=self._constrained(),
            value_aids=self.config.value_aids,
            tools=list(self.run_tools(state.run_id) or ()),
        )

    def _constrained(self) -> bool:
        """Whether to ask the server for constrained decoding (see CompilerConfig)."""
        if self.config.constrained is not None:
            return self.config.constrained
        return constrained_for(self.llm, self.dialect)

    # ------------------------------------------------------------------ scheduler

    @step(num_workers=1)
    async def schedule(
        self, ctx: Context[CompilerState], ev: PlanEvent | TaskResult | TaskApprovalResponse
    ) -> TaskReady | TaskResult | JoinEvent | None:
        """Admit tasks, settle results, take verdicts on held tasks, dispatch what is
        ready (within the tools' limits); join when all settled.

        The facts an event adds (tasks, a result) are written in one write, with the
        event's entry in the run's log; what to dispatch is the fold of that log
        (:mod:`.scheduler`). An event that adds nothing (a duplicate, late or forged
        result, a task id seen before) is ignored. This step run again after a crash,
        its facts already written, finds its event last in the log and makes the same
        decision again. A ready task's arguments, resolved by the fold, are validated
        against the tool's schema here, once: a call that does not fit is an error
        observation.
        """
        state = await self._state(ctx)
        if self._stale(ev, state):
            return None  # a late event of an earlier, cancelled run on this context
        await self._tools(state)  # the run's tools, for _emit (which checks arguments)
        book = self._books.get(state)
        pos = book.events.get(ev.event_id)
        if pos is not None:
            if pos != book.n - 1:
                return None  # an event taken before, delivered again
            rules = self._rules(state)
            book = fold(state, self.config.concurrency, upto=pos, rules=rules)  # our step, again
            decision = book.apply(state.log[pos], state.tasks, state.outcomes)
        else:
            facts = facts_of(ev, state, book)
            if facts is None:
                return None
            if isinstance(ev, TaskApprovalResponse):
                record_verdict(state.run_id, ev.task_id, ev.action)
            complete = ev if isinstance(ev, PlanEvent) and facts.entry.complete else None
            state = with_facts(state, facts, complete)
            decision = book.apply(facts.entry, state.tasks, state.outcomes)
            await ctx.store.set_state(state)
        self._emit(ctx, state, decision)
        held = book.only_held()
        rounds = state.rounds
        if held and state.round < len(rounds) and rounds[state.round].complete:
            awaiting = AwaitingApproval(round=state.round, run_id=state.run_id, task_ids=held)
            ctx.write_event_to_stream(awaiting)
        if isinstance(ev, TaskApprovalResponse) or (isinstance(ev, PlanEvent) and not ev.complete):
            return None
        return fan_in(ctx, state, ev)

    def _emit(self, ctx: Context[CompilerState], state: CompilerState, decision: Decision) -> None:
        tools = self._run_tools.known(state.run_id)
        rules = self._rules(state)
        traced = partial(self._trace_not_run, state)
        emit(ctx, state, tools, decision, self._calls, on_not_run=traced, rules=rules)

    def _trace_not_run(
        self, state: CompilerState, task: PlanTask, message: str, skipped: bool, args: Any
    ) -> None:
        """Trace `task` of `state`'s run as not run (`message`: its observation)."""
        shown = (task.id, task.round, task.tool, task.deps, args)
        self._tracer.not_run(state.run_id, *shown, message, skipped)

    # ------------------------------------------------------------------ executor

    @step(num_workers=MAX_PARALLEL_TOOLS, accept_event_subclasses=True)
    async def execute(self, ctx: Context[CompilerState], ev: TaskReady) -> TaskResult | None:
        """Run one tool call; failures and timeouts become error observations.

        Only a task of the plan that the scheduler dispatched and nobody settled runs,
        with the arguments it was dispatched with (never taken from the event). A
        :class:`TaskCut` (a resumed run's call that must not run twice) gets the
        ``after_crash`` observation instead of a call.
        """
        state = await self._state(ctx)
        if self._stale(ev, state):
            return None  # a late event of an earlier, cancelled run on this context
        task = state.tasks.get(ev.task_id)
        policy = self._rules(state).of(task.tool) if task is not None else None
        if task is None or task.round != ev.round or policy is None:
            return None  # not a task of the plan
        if not self._dispatched(state, ev.task_id, policy.requires_approval):
            return None  # not dispatched, not approved, or settled
        if not self._started_calls.take(ctx.store, task.id):
            return None  # started here before: a second TaskReady for it starts nothing
        if isinstance(ev, TaskCut):
            return self._cut(ctx, state, task)
        tool = (await self._tools(state)).get(task.tool)
        args = self._calls.take(state.run_id, task.id)
        if args is None:  # dispatched by another process (a resumed run)
            args, error = prepare(state, task, tool)
            if error is not None:
                failed = not_run(task, state.run_id, error, False)
                ctx.write_event_to_stream(failed)
                return failed
        ready = ready_event(task, state.run_id, args, ev.waited)  # `waited`: shown only
        span = self._tracer.start_task(
            state.run_id, task.id, task.round, task.tool, task.deps, args, tool
        )
        on_attempt = partial(self._started, ctx, ready, policy.side_effect)
        with Active(span):  # the tool's spans nest in it
            result = await self._cached_call(ctx, state.run_id, ready, tool, policy, on_attempt)
        saved = result.saved if result.cached else None
        self._tracer.end_task(state.run_id, task.id, result.output, result.is_error, False, saved)
        if not result.cached:
            seconds = result.finished_at - result.started_at
            record_task(task.tool, policy.side_effect, seconds, result.is_error, result.attempts)
        result.run_id = state.run_id
        ctx.write_event_to_stream(result)
        return result

    def _cut(self, ctx: Context[CompilerState], state: CompilerState, task: PlanTask) -> TaskResult:
        """The outcome of `task`, whose call a crash cut after its start was committed: the
        workflow's ``after_crash`` observation (an explicit mark wins over a ``pure`` or
        ``idempotent`` class: such a call is not run again either)."""
        result = self.after_crash(state, task.id).result or unknown_after_crash(task, state.run_id)
        record_outcome_unknown(task.tool)
        result.run_id = state.run_id
        self._trace_not_run(state, task, str(result.output), False, task.kwargs)
        ctx.write_event_to_stream(result)
        return result

    async def _started(
        self,
        ctx: Context[CompilerState],
        ev: TaskReady,
        side_effect: str,
        attempt: int,
        attempts: int,
        error: str | None,
    ) -> None:
        """Tell the stream a retry of `ev`'s call starts (the first try is its
        ``TaskReady``), then await the runtime's hook and ``before_tool_call`` for every
        try. No one to tell (a first try, no hooks): no event is built."""
        runtime_hook = BEFORE_CALL.get()
        if attempt == 1 and runtime_hook is None and self.before_tool_call is None:
            return
        started = TaskStarted(
            round=ev.round,
            run_id=ev.run_id,
            task_id=ev.task_id,
            tool_name=ev.tool_name,
            attempt=attempt,
            attempts=attempts,
            side_effect=side_effect,
            idempotency_key=ev.call_key,
            error=error,
            started_at=time.time(),
        )
        if attempt > 1:
            ctx.write_event_to_stream(started)
        if runtime_hook is not None:
            await runtime_hook(started)
        if self.before_tool_call is not None:
            await self.before_tool_call(started)

    def _dispatched(self, state: CompilerState, task_id: int, needs_approval: bool) -> bool:
        """Whether the scheduler dispatched `task_id` and it is not settled."""
        book = self._books.peek(state)
        if book is not None:
            return task_id in book.running
        return runnable(state, task_id, needs_approval)

    # ------------------------------------------------------------------ joiner

    @step
    async def join(
        self, ctx: Context[CompilerState], ev: JoinEvent
    ) -> StopEvent | ReplanEvent | None:
        """Ask the joiner to finish or replan; the last allowed round always finishes.

        Under constrained decoding a first round with lookups that found nothing is
        planned again once, with what failed as the reason, before any joiner call.

        A task whose tool is ``return_direct`` ends the run with its output instead, and
        so does a dialect's :class:`~llm_compiler.dialects.base.DirectAnswer`. A blank
        reply is asked again once, then replanned (or, on the last round, a
        :class:`RunError`).
        """
        state = await self._state(ctx)
        if self._stale(ev, state):
            return None  # a late event of an earlier, cancelled run on this context
        if state.answer is not None:  # answered before: this step runs again after a crash
            return StopEvent(result=self._output(state, state.answer, state.direct))
        if ev.round < state.round:  # the verdict on this round was to replan (recorded)
            return replan_event(state, ev.round)
        direct = return_direct(state, await self._tools(state), ev.round)
        if direct is not None:
            output = state.outcomes[direct].output
            answer = output if isinstance(output, str) else str(output)
            return StopEvent(result=await self._finish(ctx, state, answer, direct))
        if isinstance(self.dialect, DirectAnswer):
            record = self._prompt(state).rounds[ev.round]
            direct_answer = self.dialect.answer_without_join(record)
            if direct_answer is not None:
                return StopEvent(result=await self._finish(ctx, state, direct_answer))
        last = state.replans >= self.config.max_replans
        retry = None if last else self._nothing_found(state, ev.round)
        if retry is not None:
            return await self._replan(ctx, state, ev.round, JoinVerdict(retry, []))
        verdict = await self._verdict(ctx, state, ev.round, last)
        decision = verdict.decision
        if decision.action == "replan" and not last:
            return await self._replan(ctx, state, ev.round, verdict)
        answer = decision.content
        if decision.action == "replan":  # out of rounds: the best we have
            answer = decision.thought or decision.content
        return StopEvent(result=await self._finish(ctx, state, answer, calls=verdict.calls))

    async def _verdict(
        self, ctx: Context[CompilerState], state: CompilerState, round: int, last: bool
    ) -> JoinVerdict:
        """The joiner's decision on `round` and the calls it took (recorded by the caller).

        A blank answer is asked again once, then replanned (on the last round: a
        :class:`RunError`, with the calls recorded). A dialect's :class:`ForcedJoin`
        decision, if it gives one, takes no call.
        """
        if isinstance(self.dialect, ForcedJoin):
            forced = self.dialect.forced_decision(self._prompt(state, last_round=last))
            if forced is not None:
                return JoinVerdict(forced, [])
        decision, call = await self._decide(ctx, state, round, last)
        calls = [call]
        if decision.content.strip() or decision.action != "finish":
            return JoinVerdict(decision, calls)
        decision, call = await self._decide(ctx, state, round, last)  # once more
        calls.append(call)
        if decision.content.strip():
            return JoinVerdict(decision, calls)
        if last:
            async with ctx.store.edit_state() as s:
                s.llm_calls = [*s.llm_calls, *calls]
            raise RunError(
                f"The joiner gave no answer in round {round}, twice, and no replan is left."
            )
        again = JoinerDecision("replan", "The joiner gave no answer; plan again.", decision.thought)
        return JoinVerdict(again, calls)

    def _nothing_found(self, state: CompilerState, round: int) -> JoinerDecision | None:
        """A replan, without asking the joiner, of a first round with tasks that raised,
        timed out or returned nothing (facts only: see
        :func:`~llm_compiler.engine.replan.failed_tasks`; a call a human rejected is
        no reason).

        Only under constrained decoding (small local models, which answer from failed
        lookups); other models' joiners see the results and decide.
        """
        if state.replans or not self._constrained():
            return None
        failed = failed_tasks(self._prompt(state).rounds[round])
        return JoinerDecision("replan", replan_reason(failed)) if failed else None

    async def _decide(
        self, ctx: Context[CompilerState], state: CompilerState, round: int, last: bool
    ) -> tuple[JoinerDecision, LLMCallUsage]:
        """One joiner call: its decision and its usage record."""
        request = self.dialect.joiner_request(self._prompt(state, last_round=last))
        tokens = TokenStream(ctx, self.name, "join", round, self.config.stream_tokens)
        tokens.add(request.prefill)  # the reply starts with it (``Thought:``): show it too
        meter = Metered(self._tracer, state.run_id, self._planner.prices)
        text, call = await metered_call(
            self.llm,
            request,
            meter,
            phase="joiner",
            round=round,
            on_delta=tokens.take,
            flush=tokens.flush,
        )
        return self.dialect.parse_decision(text), call

    async def _replan(
        self,
        ctx: Context[CompilerState],
        state: CompilerState,
        round: int,
        verdict: JoinVerdict,
    ) -> ReplanEvent:
        """Record the verdict to replan `round` (with the joiner's calls); start the next."""
        decision = verdict.decision
        update = {"joiner_thought": decision.thought, "replan_reason": decision.content}
        async with ctx.store.edit_state() as s:
            s.rounds[round] = s.rounds[round].model_copy(update=update)
            s.replans = s.round = round + 1
            s.llm_calls = [*s.llm_calls, *verdict.calls]
            state = s.model_copy()
        replan = replan_event(state, round)
        ctx.write_event_to_stream(replan)
        self._tracer.end_round(state.run_id, round_summary(state, round), "replan")
        return replan

    async def _finish(
        self,
        ctx: Context[CompilerState],
        state: CompilerState,
        answer: str,
        direct: int | None = None,
        *,
        calls: Sequence[LLMCallUsage] = (),
        verdict: PlanApprovalResponse | None = None,
    ) -> CompilerOutput:
        """Record the answer with what led to it (the joiner's `calls`, a plan's rejecting
        `verdict`), in one write: the first answer of a run stands; return it."""
        message = ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        async with ctx.store.edit_state() as s:
            if s.answer is None:
                s.answer, s.direct = answer, direct
                s.transcript = [
                    *s.transcript,
                    ChatMessage(role=MessageRole.USER, content=s.question),
                    message,
                ]
                s.llm_calls = [*s.llm_calls, *calls]
                s.verdict = s.verdict or verdict
                if state.memory is not None:
                    await chat_memory.remember(state.memory, message)
            answer, direct = s.answer, s.direct
            state = s.model_copy()
        # While the run's tools are still known to this process.
        tools = self.run_tools(state.run_id)
        if (self.config.cache_plans or self.config.speculate) and tools is not None:
            self._plans.learn(state, tools, self._rules(state), self.dialect.name)
        self._planner.warm(state, tools, self._prompt(state))
        self._books.forget(state.run_id)
        self._calls.forget(state.run_id)
        self._speculation.forget(state.run_id)
        self._results.forget(state.run_id)
        return self._output(state, answer, direct)

    def _output(self, state: CompilerState, answer: str, direct: int | None) -> CompilerOutput:
        summary = summarize(state, answer, self.dialect.name, direct)
        return CompilerOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=answer),
            current_agent_name=self.name,
            raw=summary.legacy_raw(),
            summary=summary,
        )
