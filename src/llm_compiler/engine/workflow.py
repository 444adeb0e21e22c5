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
scheduler runs with one worker; it fans the task results back in with
``ctx.collect_events`` over ``[PlanEvent, TaskResult * n]``, fed only with the complete
plan and each task's first result, where ``n`` (tasks admitted so far) only grows.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.objects import ObjectRetriever
from llama_index.core.tools import BaseTool
from workflows import Context, Workflow, step
from workflows.events import StopEvent
from workflows.handler import WorkflowHandler

from llm_compiler.config import MAX_PARALLEL_TOOLS, CompilerConfig, make_config
from llm_compiler.dialects.base import DirectAnswer, PlanDialect
from llm_compiler.dialects.grounding import failed_tasks, replan_reason
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.dialects.thought_action import JoinerDecision
from llm_compiler.engine.dispatch import compiled, emit, fan_in, replan_event, return_direct
from llm_compiler.engine.executor import run_task
from llm_compiler.engine.llm import (
    Metered,
    TokenUsage,
    default_llm,
    is_chat,
    metered_call,
    require_llm,
)
from llm_compiler.engine.planner import Planner, TokenStream, parse_plan_text, publish
from llm_compiler.engine.runs import RunRegistry, RunTools
from llm_compiler.engine.scheduler import Books, Decision, facts_of, fold, runnable, with_facts
from llm_compiler.engine.state import CompilerState, round_records
from llm_compiler.engine.summary import CompilerOutput, round_summary, summarize
from llm_compiler.errors import ConfigurationError, RunError
from llm_compiler.events import (
    CompiledPlan,
    CompilerStartEvent,
    JoinEvent,
    PlanApprovalRequest,
    PlanApprovalResponse,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.plan import PlanTask, resolve_kwargs
from llm_compiler.tools import ToolLike, ToolSet, tool_map
from llm_compiler.tracing import Tracer, price_table
from llm_compiler.tracing.spans import Active

__all__ = ["MAX_PARALLEL_TOOLS", "LLMCompilerWorkflow"]


class LLMCompilerWorkflow(Workflow):
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
        planner_examples / joiner_examples: Few-shot examples of the default dialect
            (``None``: built-in; ``""``: none).
        name: Shown as ``current_agent_name`` on streamed tokens and in the output.
        timeout: The workflow's own timeout in seconds (None: none).
        tool_context: Passed to tools that take a ``Context`` (default: the run's own).
        system_prompt: Extra instructions put before the planner's and joiner's own.
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
        **options: Any,
    ) -> None:
        fields = set(CompilerConfig.model_fields)
        overrides = {k: options.pop(k) for k in list(options) if k in fields}
        require_llm(llm)
        super().__init__(timeout=timeout, **options)
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
        self._books = Books(self.config.concurrency)
        self._run_tools = RunTools()

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
        with self._tracer.start_run(run_id):  # the run's span: its steps' spans nest in it
            handler = super().run(ctx, start_event, **kwargs)
        self._tracer.watch(handler, run_id)
        self._runs.started(handler, run_id, new_turn)
        return handler

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
            # This round's plan is made and waits for a verdict: ask again, plan nothing.
            held = state.held
            return PlanApprovalRequest(round=held.round, run_id=held.run_id, plan=compiled(held))
        context = self._planner.context(state, self._prompt(state), self._constrained())
        self._tracer.start_round(state.run_id, state.round)
        final = await self._planner.plan(ctx, state, context)
        ctx.write_event_to_stream(final)
        if state.mode == "plan_only":
            return StopEvent(result=compiled(final))
        if state.mode == "approve":
            async with ctx.store.edit_state() as s:
                s.held, s.verdict = final, None
            return PlanApprovalRequest(round=final.round, run_id=final.run_id, plan=compiled(final))
        return final

    @step
    async def review(
        self, ctx: Context[CompilerState], ev: PlanApprovalResponse
    ) -> PlanEvent | StopEvent | None:
        """Run the held plan as approved or edited, or end the run if it was rejected.

        The first verdict on a plan is the one that counts: it is recorded, and a step
        run again (or a second response) acts on the recorded verdict.
        """
        state = await self._state(ctx)
        held = state.held
        if held is None or held.round != state.round or state.answer is not None:
            return None  # no plan is waiting (a late response)
        if (ev.run_id, ev.round) != (held.run_id, held.round):
            return None  # it answers another plan (late, duplicate or forged)
        verdict = state.verdict
        if verdict is None:
            verdict = PlanApprovalResponse(
                run_id=ev.run_id,
                round=ev.round,
                action=ev.action,
                plan_text=ev.plan_text,
                reason=ev.reason,
            )
            async with ctx.store.edit_state() as s:
                s.verdict = verdict
            state.verdict = verdict
        if verdict.action == "reject":
            reason = verdict.reason
            answer = f"The plan was rejected{': ' + reason if reason else '.'}"
            return StopEvent(result=await self._finish(ctx, state, answer))
        # A new event each time: if the scheduler took this plan before (a second
        # response), it adds nothing and decides nothing.
        plan = held.model_copy(update={"event_id": uuid.uuid4().hex})
        if verdict.action == "edit":
            assert state.toolset is not None
            context = self._planner.context(state, self._prompt(state), False)
            plan = parse_plan_text(self.dialect, context, verdict.plan_text or "", state.toolset)
            plan.run_id = state.run_id
            ctx.write_event_to_stream(plan)
        if plan.tasks:
            publish(ctx, PlanEvent(round=plan.round, tasks=plan.tasks, run_id=plan.run_id))
        return plan

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
            memory = await asyncio.to_thread(
                ChatMemoryBuffer.from_defaults, chat_history=list(state.transcript)
            )
        if ev.chat_history is not None:
            await memory.aset(list(ev.chat_history))
        history = await memory.aget()
        await memory.aput(ChatMessage(role=MessageRole.USER, content=question))
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
                toolset=toolset,
            )
        )

    async def _toolset(self, question: str, names: Sequence[str] | None = None) -> ToolSet:
        """This run's tools: the workflow's own plus the retriever's choice for `question`."""
        retrieved: list[BaseTool] = []
        if self.tool_retriever is not None:
            retrieved = list(await self.tool_retriever.aretrieve(question))
        toolset = ToolSet.build(self.tools, retrieved)
        if names is not None:  # a resumed run keeps the tools it was planned with
            toolset = ToolSet({n: t for n, t in toolset.by_name.items() if n in set(names)})
        return toolset

    async def _state(self, ctx: Context[CompilerState]) -> CompilerState:
        """The committed state (a copy) with the run's tool set; writes nothing.

        A durable store keeps no live objects: the tool set is the one the run chose at
        its start, kept per run in this process, or, in a process that resumes the run,
        rebuilt once from its ``tool_names`` (one retriever call).
        """
        state = await ctx.store.get_state()
        if state.toolset is None and state.question:
            question, names = state.question, list(state.tool_names)
            state.toolset = await self._run_tools.get(
                state.run_id, lambda: self._toolset(question, names)
            )
        return state

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
            tools=list(state.toolset) if state.toolset is not None else (),
        )

    def _constrained(self) -> bool:
        """Whether to ask the server for constrained decoding (see CompilerConfig)."""
        if self.config.constrained is not None:
            return self.config.constrained
        return bool(getattr(self.llm, "llm_compiler_constrained", False))

    # ------------------------------------------------------------------ scheduler

    @step(num_workers=1)
    async def schedule(
        self, ctx: Context[CompilerState], ev: PlanEvent | TaskResult
    ) -> TaskReady | TaskResult | JoinEvent | None:
        """Admit tasks, settle results, dispatch what is ready; join when all settled.

        The facts an event adds (tasks, a result) are written in one write, with the
        event's entry in the run's log; what to dispatch is the fold of that log
        (:mod:`.scheduler`). An event that adds nothing (a duplicate, late or forged
        result, a task id seen before) is ignored. This step run again after a crash,
        its facts already written, finds its event last in the log and makes the same
        decision again. A ready task's resolved arguments are validated against the
        tool's schema here: a call that does not fit is an error observation.
        """
        state = await self._state(ctx)
        if self._stale(ev, state):
            return None  # a late event of an earlier, cancelled run on this context
        book = self._books.get(state)
        pos = book.events.get(ev.event_id)
        if pos is not None:
            if pos != book.n - 1:
                return None  # an event taken before, delivered again
            book = fold(state, self.config.concurrency, upto=pos)  # our own step, again
            decision = book.apply(state.log[pos], state.tasks, state.outcomes)
        else:
            facts = facts_of(ev, state, book)
            if facts is None:
                return None
            complete = ev if isinstance(ev, PlanEvent) and facts.entry.complete else None
            state = with_facts(state, facts, complete)
            decision = book.apply(facts.entry, state.tasks, state.outcomes)
            await ctx.store.set_state(state)
        self._emit(ctx, state, decision)
        if isinstance(ev, PlanEvent) and not ev.complete:
            return None
        return fan_in(ctx, state, ev)

    def _emit(self, ctx: Context[CompilerState], state: CompilerState, decision: Decision) -> None:
        def traced(task: PlanTask, message: str, skipped: bool, args: Any) -> None:
            self._tracer.not_run(
                state.run_id, task.id, task.round, task.tool, task.deps, args, message, skipped
            )

        emit(ctx, state, decision, on_not_run=traced)

    # ------------------------------------------------------------------ executor

    @step(num_workers=MAX_PARALLEL_TOOLS)
    async def execute(self, ctx: Context[CompilerState], ev: TaskReady) -> TaskResult | None:
        """Run one tool call; failures and timeouts become error observations.

        Only a task of the plan that the scheduler dispatched and nobody settled runs,
        with arguments resolved again from the facts (never taken from the event).
        """
        state = await self._state(ctx)
        if self._stale(ev, state):
            return None  # a late event of an earlier, cancelled run on this context
        task = state.tasks.get(ev.task_id)
        if task is None or task.round != ev.round or not self._dispatched(state, ev.task_id):
            return None  # not a task of the plan, not dispatched, or settled
        args = resolve_kwargs(task.kwargs, {d: state.outcomes[d].output for d in task.deps})
        ready = ev.model_copy(update={"args": args, "tool_name": task.tool})
        tool = state.toolset.get(task.tool) if state.toolset is not None else None
        context = ctx if self.tool_context is None else self.tool_context
        task = state.tasks.get(ev.task_id)
        deps = task.deps if task is not None else []
        span = self._tracer.start_task(
            ev.run_id, ev.task_id, ev.round, ev.tool_name, deps, ev.args, tool
        )
        with self._runs.tool_call(ev.run_id), Active(span):  # the tool's spans nest in it
            result = await run_task(
                ready,
                tool,
                timeout=self.config.tool_timeout,
                context=context,
                max_chars=self.config.max_result_chars,
            )
        self._tracer.end_task(ev.run_id, ev.task_id, result.output, result.is_error, False)
        result.run_id = ev.run_id
        ctx.write_event_to_stream(result)
        return result

    def _dispatched(self, state: CompilerState, task_id: int) -> bool:
        """Whether the scheduler dispatched `task_id` and it is not settled."""
        book = self._books.peek(state)
        if book is not None:
            return task_id in book.running
        return runnable(state, task_id)

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
        direct = return_direct(state, ev.round)
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
            return await self._replan(ctx, state, ev.round, retry)
        spent = TokenUsage()
        decision = await self._decide(ctx, state, ev.round, last, spent)
        if not decision.content.strip() and decision.action == "finish":
            decision = await self._decide(ctx, state, ev.round, last, spent)  # once more
            if not decision.content.strip():
                if last:
                    raise RunError(
                        f"The joiner gave no answer in round {ev.round}, twice, and no "
                        "replan is left."
                    )
                decision = JoinerDecision(
                    "replan", "The joiner gave no answer; plan again.", decision.thought
                )
        if decision.action == "replan" and not last:
            return await self._replan(ctx, state, ev.round, decision)
        answer = decision.content
        if decision.action == "replan":  # out of rounds: the best we have
            answer = decision.thought or decision.content
        return StopEvent(result=await self._finish(ctx, state, answer))

    def _nothing_found(self, state: CompilerState, round: int) -> JoinerDecision | None:
        """A replan, without asking the joiner, of a first round whose lookups found nothing.

        Only under constrained decoding (small local models, which answer from failed
        lookups); other models' joiners see the failures and decide.
        """
        if state.replans or not self._constrained():
            return None
        failed = failed_tasks(self._prompt(state).rounds[round])
        return JoinerDecision("replan", replan_reason(failed)) if failed else None

    async def _decide(
        self,
        ctx: Context[CompilerState],
        state: CompilerState,
        round: int,
        last: bool,
        spent: TokenUsage,
    ) -> JoinerDecision:
        """One joiner call; `spent` (this step's calls) is recorded as the round's usage."""
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
        spent.prompt_tokens += call.prompt_tokens
        spent.completion_tokens += call.completion_tokens
        update = {"join_tokens": (spent.prompt_tokens, spent.completion_tokens)}
        state.rounds = list(state.rounds)
        state.rounds[round] = state.rounds[round].model_copy(update=update)
        state.prompt_tokens, state.completion_tokens = state.usage()
        async with ctx.store.edit_state() as s:
            s.rounds[round] = s.rounds[round].model_copy(update=update)
            s.prompt_tokens, s.completion_tokens = s.usage()
            s.llm_calls = [*s.llm_calls, call]
        state.llm_calls = [*state.llm_calls, call]
        return self.dialect.parse_decision(text)

    async def _replan(
        self,
        ctx: Context[CompilerState],
        state: CompilerState,
        round: int,
        decision: JoinerDecision,
    ) -> ReplanEvent:
        update = {"joiner_thought": decision.thought, "replan_reason": decision.content}
        async with ctx.store.edit_state() as s:
            s.rounds[round] = s.rounds[round].model_copy(update=update)
            s.replans = s.round = round + 1
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
    ) -> CompilerOutput:
        """Record the answer (once: the first answer of a run stands) and return it."""
        message = ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        async with ctx.store.edit_state() as s:
            if s.answer is None:
                s.answer, s.direct = answer, direct
                s.transcript = [
                    *s.transcript,
                    ChatMessage(role=MessageRole.USER, content=s.question),
                    message,
                ]
                if state.memory is not None:
                    await state.memory.aput(message)
            answer, direct = s.answer, s.direct
            state = s.model_copy(update={"toolset": state.toolset})
        self._books.forget(state.run_id)
        self._planner.warm(state, self._prompt(state))
        return self._output(state, answer, direct)

    def _output(self, state: CompilerState, answer: str, direct: int | None) -> CompilerOutput:
        summary = summarize(state, answer, self.dialect.name, direct)
        return CompilerOutput(
            response=ChatMessage(role=MessageRole.ASSISTANT, content=answer),
            current_agent_name=self.name,
            raw=summary.legacy_raw(),
            summary=summary,
        )
