"""LLMCompilerWorkflow: plan a DAG of tool calls, run each as soon as its inputs exist, join.

Steps and events::

    CompilerStartEvent | ReplanEvent -> plan -> PlanEvent (streamed, one per completed line)
    PlanEvent | TaskResult -> schedule -> TaskReady (inputs done) | TaskResult (cannot run)
                                       -> JoinEvent (plan complete, every task settled)
    TaskReady -> execute -> TaskResult
    JoinEvent -> join -> StopEvent(AgentOutput) | ReplanEvent

The scheduler runs with one worker and is the only writer of the DAG bookkeeping; it fans
the task results back in with ``ctx.collect_events`` over ``[PlanEvent, TaskResult * n]``,
where ``n`` (tasks parsed so far) only grows, and the complete ``PlanEvent`` keeps the batch
open until the planner has finished.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import aclosing
from typing import Any, Literal

from llama_index.core.agent.workflow import AgentOutput
from llama_index.core.llms import LLM, ChatMessage, MessageRole
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer
from llama_index.core.objects import ObjectRetriever
from llama_index.core.settings import Settings
from llama_index.core.tools import BaseTool
from workflows import Context, Workflow, step
from workflows.events import Event, StopEvent

from llm_compiler import prompts
from llm_compiler._llm import is_chat, stream_text
from llm_compiler._scheduler import Scheduler
from llm_compiler.errors import ConfigurationError, LLMCallError
from llm_compiler.events import (
    CompilerStartEvent,
    CompilerStream,
    JoinEvent,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.parser import END_OF_PLAN, PlanParser, parse_joiner_output
from llm_compiler.plan import PlanTask, resolve
from llm_compiler.state import CompilerState, TaskOutcome
from llm_compiler.tools import ToolLike, bind, call_tool, jsonable, tool_map, validate_arguments

#: Most tool calls one run executes at once; ``max_concurrency`` can only lower it.
MAX_PARALLEL_TOOLS = 64
_THREADS: ThreadPoolExecutor | None = None


class _Outbox:
    """Coalesces what an LLM stream produced until the event loop next gets control.

    ``touch()`` schedules ``flush`` with ``call_soon``; it runs as soon as the stream
    waits for the model. A model that streams token by token still gets one event per
    chunk, with no added delay, while chunks that arrive in a burst (one network read, a
    fast local model) become one event instead of hundreds.
    """

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._handle: asyncio.Handle | None = None
        self._error: Exception | None = None

    def touch(self) -> None:
        if self._error is not None:
            raise self._error
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        self._handle = None
        try:
            self._flush()
        except Exception as e:  # surfaced by the next touch() or close()
            self._error = e

    def discard(self) -> None:
        """Drop what is pending: the step is failing or being cancelled."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def close(self) -> None:
        """Flush what is left, now; raise what a flush raised."""
        if self._handle is not None:
            self._handle.cancel()
        self._run()
        if self._error is not None:
            raise self._error


def _publish(ctx: Context, ev: Event) -> None:
    """Show `ev` on the run's stream and route it to the steps that take it."""
    ctx.write_event_to_stream(ev)
    ctx.send_event(ev)


def _tool_threads() -> ThreadPoolExecutor:
    """The thread pool for sync tools, shared by all workflows (threads start on demand)."""
    global _THREADS
    if _THREADS is None:
        _THREADS = ThreadPoolExecutor(MAX_PARALLEL_TOOLS, thread_name_prefix="llm-compiler-tool")
    return _THREADS


PLAN_STOP = (END_OF_PLAN, "\n###", "\nQuestion:")
JOIN_STOP = ("\n###", "\nQuestion:", "<END_OF_RESPONSE>")
_LONGEST_JOIN_STOP = max(map(len, JOIN_STOP))


class LLMCompilerWorkflow(Workflow):
    """The LLMCompiler agent as a LlamaIndex workflow.

    ``await wf.run(user_msg=...)`` returns a llama-index ``AgentOutput`` whose ``str()`` is
    the answer. One instance serves any number of concurrent runs: all run data lives in
    the run's context (see :class:`~llm_compiler.state.CompilerState`).

    Args:
        tools: llama-index tools or plain callables (sync ones run in a thread pool).
        llm: Any llama-index LLM; chat models get messages, completion models
            (``is_chat_model=False``) one few-shot prompt. Default: ``Settings.llm``.
        max_replans: Replan rounds allowed after the first plan; the last round must finish.
        max_concurrency: Most tool calls running at once per run (None: up to
            ``MAX_PARALLEL_TOOLS``).
        tool_timeout: Seconds per tool call; a timeout becomes an error observation.
        tool_retriever: Chooses the tools per question (added to ``tools``).
        max_tasks: Most tasks accepted in one plan; later lines become a plan error.
        planner_examples: Few-shot plan examples (``None``: built-in; ``""``: none).
        joiner_examples: Few-shot joiner examples (``None``: built-in; ``""``: none).
        max_observation_chars: Observations longer than this are cut in prompts.
        name: Shown as ``current_agent_name`` on streamed tokens and in the output.
        timeout: The workflow's own timeout in seconds (None: none).
        tool_context: Passed to tools that take a ``Context`` (default: the run's own).
        stream_tokens: Stream planner and joiner tokens as ``AgentStream`` events.
        system_prompt: Extra instructions put before the planner's and joiner's own.
    """

    def __init__(
        self,
        tools: Sequence[ToolLike] = (),
        llm: LLM | None = None,
        *,
        max_replans: int = 3,
        max_concurrency: int | None = None,
        tool_timeout: float | None = None,
        tool_retriever: ObjectRetriever[BaseTool] | None = None,
        max_tasks: int = 100,
        planner_examples: str | None = None,
        joiner_examples: str | None = None,
        max_observation_chars: int = 4000,
        name: str = "llm_compiler",
        timeout: float | None = 600.0,
        tool_context: Any = None,
        stream_tokens: bool = True,
        system_prompt: str | None = None,
        **workflow_kwargs: Any,
    ) -> None:
        super().__init__(timeout=timeout, **workflow_kwargs)
        if max_replans < 0:
            raise ConfigurationError("max_replans must be 0 or more.")
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError("max_concurrency must be at least 1 (or None).")
        if not tools and tool_retriever is None:
            raise ConfigurationError("Give tools=[...] or a tool_retriever.")
        self.tools = tool_map(tools, _tool_threads())
        self._registry: dict[str, BaseTool] = dict(self.tools)
        self.llm = llm or Settings.llm
        self.max_replans = max_replans
        self.max_concurrency = min(max_concurrency or MAX_PARALLEL_TOOLS, MAX_PARALLEL_TOOLS)
        self.tool_timeout = tool_timeout
        self.tool_retriever = tool_retriever
        self.max_tasks = max_tasks
        self.planner_examples = planner_examples
        self.joiner_examples = joiner_examples
        self.max_observation_chars = max_observation_chars
        self.name = name
        self.tool_context = tool_context
        self.stream_tokens = stream_tokens
        self.system_prompt = system_prompt

    # ------------------------------------------------------------------ planner

    @step
    async def plan(
        self, ctx: Context[CompilerState], ev: CompilerStartEvent | ReplanEvent
    ) -> PlanEvent | None:
        """Stream the planner LLM and emit tasks as their lines complete."""
        if isinstance(ev, CompilerStartEvent):
            await self._begin(ctx, ev)
        state = await ctx.store.get_state()
        round = state.round
        tools = [self._registry[n] for n in state.tool_names]
        names = {t.metadata.get_name() for t in tools}
        planner_input = prompts.PlannerInput(
            tools=tools,
            question=state.question,
            history=state.transcript,
            rounds=self._records(state),
            next_id=state.next_id(),
            examples=self.planner_examples,
            system_prompt=self.system_prompt,
        )
        request = self._request(planner_input)
        parser = PlanParser(
            known_ids=state.tasks,
            taken_ids=state.taken_ids(),
            round=round,
            max_tasks=self.max_tasks,
        )
        checked: list[PlanTask] = []
        tokens: list[str] = []
        parsed: list[PlanTask] = []

        def flush() -> None:
            self._token(ctx, tokens, parser.text, "plan", round)
            if parsed:
                checked.extend(self._emit_plan(ctx, round, parsed, names))
                parsed.clear()

        outbox = _Outbox(flush)
        try:
            async with aclosing(stream_text(self.llm, stop=PLAN_STOP, **request)) as stream:
                async for delta in stream:
                    tokens.append(delta)
                    parsed.extend(parser.feed(delta))
                    outbox.touch()
                    if parser.done:
                        break  # stop reading: the rest of the stream is not needed
        except BaseException as e:
            outbox.discard()
            if isinstance(e, Exception):
                raise LLMCallError("planner", round, e) from e
            raise
        parsed.extend(parser.finish())
        outbox.close()
        final = PlanEvent(
            round=round,
            tasks=checked,
            complete=True,
            thoughts=parser.thoughts,
            text=parser.text,
            errors=parser.errors,
            join_id=parser.join_id,
        )
        ctx.write_event_to_stream(final)
        return final

    async def _begin(self, ctx: Context[CompilerState], ev: CompilerStartEvent) -> None:
        """Set up a run: question, conversation, memory and the tools it may use."""
        state = await ctx.store.get_state()
        question = ev.user_msg
        if isinstance(question, ChatMessage):
            question = question.content or ""
        if not question:
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
        names = list(self.tools)
        if self.tool_retriever is not None:
            for tool in await self.tool_retriever.aretrieve(question):
                tool_name = tool.metadata.get_name()
                self._registry.setdefault(tool_name, tool)
                if tool_name not in names:
                    names.append(tool_name)
        # A new question starts a fresh DAG; the conversation carries what came before.
        await ctx.store.set_state(
            CompilerState(
                question=question,
                transcript=list(history),
                tool_names=names,
                memory=memory,
            )
        )

    def _emit_plan(
        self, ctx: Context, round: int, tasks: list[PlanTask], names: set[str]
    ) -> list[PlanTask]:
        checked = [self._check(t, names) for t in tasks]
        _publish(ctx, PlanEvent(round=round, tasks=checked))
        return checked

    def _check(self, task: PlanTask, names: set[str]) -> PlanTask:
        """Reject unknown tools and bind arguments to the tool's parameters."""
        if task.error is not None:
            return task
        if task.tool not in names:
            available = ", ".join(sorted(names))
            return task.model_copy(
                update={"error": f"Unknown tool {task.tool!r}. Available: {available}."}
            )
        return bind(task, self._registry[task.tool])

    def _token(
        self, ctx: Context, tokens: list[str], text: str, phase: Literal["plan", "join"], round: int
    ) -> None:
        """Stream the tokens received since the last call (and clear them)."""
        delta = "".join(tokens)
        tokens.clear()
        if not self.stream_tokens or not delta:
            return
        ctx.write_event_to_stream(
            CompilerStream(
                delta=delta,
                response=text,
                current_agent_name=self.name,
                raw={"phase": phase, "round": round},
                phase=phase,
                round=round,
            )
        )

    # ------------------------------------------------------------------ scheduler

    @step(num_workers=1)
    async def schedule(
        self, ctx: Context[CompilerState], ev: PlanEvent | TaskResult
    ) -> TaskReady | TaskResult | JoinEvent | None:
        """Admit tasks, settle results, dispatch what is ready; join when all settled."""
        sched = Scheduler(await ctx.store.get_state(), self.max_concurrency)
        if isinstance(ev, PlanEvent):
            sched.admit(ev.tasks)
            if ev.complete:
                record = sched.round_record(ev.round)
                record.text, record.thoughts = ev.text, ev.thoughts
                record.errors, record.join_id = ev.errors, ev.join_id
                record.complete = True
        else:
            sched.settle(
                ev.task_id, TaskOutcome(output=ev.output, is_error=ev.is_error, skipped=ev.skipped)
            )
        state = sched.state
        await ctx.store.set_state(state)
        now = time.time()
        for task, message, skipped in sched.out.failed:
            result = TaskResult(
                round=task.round,
                task_id=task.id,
                tool_name=task.tool,
                output=message,
                is_error=True,
                skipped=skipped,
                started_at=now,
                finished_at=now,
            )
            _publish(ctx, result)
        for task, kwargs in sched.out.dispatch:
            _publish(
                ctx, TaskReady(round=task.round, task_id=task.id, tool_name=task.tool, args=kwargs)
            )
        if isinstance(ev, PlanEvent) and not ev.complete:
            return None
        round = ev.round
        expected = [PlanEvent] + [TaskResult] * state.rounds[round].n_tasks
        if ctx.collect_events(ev, expected, buffer_id=f"round-{round}") is None:
            return None
        join = JoinEvent(round=round)
        ctx.write_event_to_stream(join)
        return join

    # ------------------------------------------------------------------ executor

    @step(num_workers=MAX_PARALLEL_TOOLS)
    async def execute(self, ctx: Context, ev: TaskReady) -> TaskResult:
        """Run one tool call; failures and timeouts become error observations."""
        started = time.time()
        try:
            tool = self._registry[ev.tool_name]
            kwargs = validate_arguments(tool, ev.args)
            call = call_tool(tool, kwargs, ctx if self.tool_context is None else self.tool_context)
            if self.tool_timeout is None:
                output, is_error = jsonable(await call), False
            else:
                output, is_error = jsonable(await asyncio.wait_for(call, self.tool_timeout)), False
        except asyncio.TimeoutError:
            output = f"Error: {ev.tool_name} timed out after {self.tool_timeout:g} s."
            is_error = True
        except Exception as e:
            output, is_error = f"Error: {type(e).__name__}: {e}", True
        result = TaskResult(
            round=ev.round,
            task_id=ev.task_id,
            tool_name=ev.tool_name,
            output=output,
            is_error=is_error,
            started_at=started,
            finished_at=time.time(),
        )
        ctx.write_event_to_stream(result)
        return result

    # ------------------------------------------------------------------ joiner

    @step
    async def join(self, ctx: Context[CompilerState], ev: JoinEvent) -> StopEvent | ReplanEvent:
        """Ask the joiner to finish or replan; the last allowed round always finishes.

        A task whose tool is ``return_direct`` ends the run with its output instead.
        """
        state = await ctx.store.get_state()
        direct = self._return_direct(state, ev.round)
        if direct is not None:
            output = state.outcomes[direct.id].output
            answer = output if isinstance(output, str) else str(output)
            return StopEvent(result=await self._finish(ctx, state, answer, direct))
        last = state.replans >= self.max_replans
        chat = is_chat(self.llm)
        request = self._request(
            prompts.JoinerInput(
                question=state.question,
                history=state.transcript,
                rounds=self._records(state),
                last_round=last,
                examples=self.joiner_examples,
                system_prompt=self.system_prompt,
            )
        )
        text = "" if chat else "Thought:"
        tokens: list[str] = []
        outbox = _Outbox(lambda: self._token(ctx, tokens, text, "join", ev.round))
        try:
            async with aclosing(stream_text(self.llm, stop=JOIN_STOP, **request)) as stream:
                async for delta in stream:
                    text += delta
                    tokens.append(delta)
                    outbox.touch()
                    tail = text[-(len(delta) + _LONGEST_JOIN_STOP) :]  # not the whole text
                    if any(s in tail for s in JOIN_STOP):
                        break
        except BaseException as e:
            outbox.discard()
            if isinstance(e, Exception):
                raise LLMCallError("joiner", ev.round, e) from e
            raise
        outbox.close()
        decision = parse_joiner_output(text)
        if decision.action == "replan" and not last:
            state.rounds = list(state.rounds)
            record = state.rounds[ev.round].model_copy(
                update={"joiner_thought": decision.thought, "replan_reason": decision.content}
            )
            state.rounds[ev.round] = record
            state.replans += 1
            state.round = ev.round + 1
            await ctx.store.set_state(state)
            replan = ReplanEvent(
                round=ev.round + 1, reason=decision.content, thought=decision.thought
            )
            ctx.write_event_to_stream(replan)
            return replan
        answer = decision.content
        if decision.action == "replan":  # out of rounds: the best we have
            answer = decision.thought or decision.content
        return StopEvent(result=await self._finish(ctx, state, answer))

    def _return_direct(self, state: CompilerState, round: int) -> PlanTask | None:
        for task in state.round_tasks(round):
            tool = self._registry.get(task.tool)
            outcome = state.outcomes.get(task.id)
            if tool and tool.metadata.return_direct and outcome and not outcome.is_error:
                return task
        return None

    async def _finish(
        self,
        ctx: Context[CompilerState],
        state: CompilerState,
        answer: str,
        direct: PlanTask | None = None,
    ) -> AgentOutput:
        message = ChatMessage(role=MessageRole.ASSISTANT, content=answer)
        memory: BaseMemory | None = state.memory
        if memory is not None:
            await memory.aput(message)
        state.transcript = [
            *state.transcript,
            ChatMessage(role=MessageRole.USER, content=state.question),
            message,
        ]
        await ctx.store.set_state(state)
        return AgentOutput(
            response=message,
            current_agent_name=self.name,
            raw={
                "rounds": len(state.rounds),
                "replans": state.replans,
                "tasks": {
                    t.id: {
                        "tool": t.tool,
                        "kwargs": t.kwargs,
                        **state.outcomes.get(t.id, TaskOutcome()).model_dump(),
                    }
                    for t in state.tasks.values()
                },
                "return_direct": None
                if direct is None
                else {
                    "task_id": direct.id,
                    "tool": direct.tool,
                    "kwargs": resolve(
                        direct.kwargs, {d: state.outcomes[d].output for d in direct.deps}
                    ),
                },
            },
        )

    # ------------------------------------------------------------------ prompts

    def _request(self, inputs: prompts.PlannerInput | prompts.JoinerInput) -> dict[str, Any]:
        """Keyword arguments of `stream_text`: messages for chat models, else a prompt."""
        if is_chat(self.llm):
            return {"messages": inputs.messages()}
        return {"prompt": inputs.prompt()}

    def _records(self, state: CompilerState) -> list[prompts.RoundRecord]:
        """Every round of the current question, with observations, for the prompts."""
        out = []
        for round, record in enumerate(state.rounds):
            lines = []
            for task in state.round_tasks(round):
                outcome = state.outcomes.get(task.id)
                lines.append((task.text, None if outcome is None else self._observe(outcome)))
            out.append(
                prompts.RoundRecord(
                    plan_lines=lines,
                    errors=record.errors,
                    thought=record.joiner_thought,
                    reason=record.replan_reason,
                )
            )
        return out

    def _observe(self, outcome: TaskOutcome) -> str:
        text = outcome.output if isinstance(outcome.output, str) else repr(outcome.output)
        if len(text) > self.max_observation_chars:
            text = text[: self.max_observation_chars] + " ...(cut)"
        return text
