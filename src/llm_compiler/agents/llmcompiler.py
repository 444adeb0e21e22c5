"""LLMCompilerAgent: the compiler as one agent of a llama-index ``AgentWorkflow``.

Each turn of the agent runs the same :class:`~llm_compiler.engine.workflow.LLMCompilerWorkflow`
(planner, streaming scheduler, parallel executor, joiner) on the conversation in the
shared memory, and re-publishes its events on the team's stream, together with a
``ToolCall``/``ToolCallResult`` pair per compiled task so existing agent UIs show the work.

Handoff: the ``handoff`` tool that AgentWorkflow gives every agent is offered to the
planner. A plan that calls it ends the compiler's turn without a joiner call, and the
agent returns that call for AgentWorkflow to execute, which switches agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import (
    AgentInput,
    AgentOutput,
    BaseWorkflowAgent,
    ToolCall,
    ToolCallResult,
)
from llama_index.core.agent.workflow.agent_context import AgentContext
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.memory import BaseMemory
from llama_index.core.tools import AsyncBaseTool, BaseTool, FunctionTool, ToolOutput
from pydantic import Field, model_validator
from workflows import Context
from workflows.events import StopEvent

from llm_compiler.config import CompilerConfig, make_config, split_config
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.engine.llm import require_llm
from llm_compiler.engine.summary import CompilerOutput, RunSummary
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import RunError
from llm_compiler.events import TaskReady, TaskResult
from llm_compiler.plan import render_value

HANDOFF = "handoff"


class LLMCompilerAgent(BaseWorkflowAgent):
    """An agent that answers by compiling and running a parallel plan of tool calls.

    Standalone: ``await LLMCompilerAgent(tools=[...], llm=llm).run(user_msg=...)`` returns an
    ``AgentOutput``. In a team: put it in ``AgentWorkflow(agents=[...])`` with a ``name``
    and a ``description``.
    """

    config: CompilerConfig = Field(
        default_factory=CompilerConfig, description="Options and limits of each turn."
    )
    dialect: Any = Field(default=None, description="The plan dialect (default: LLMCompiler).")
    planner_examples: str | None = Field(default=None, description="Few-shot plan examples.")
    joiner_examples: str | None = Field(default=None, description="Few-shot joiner examples.")
    compiler_timeout: float | None = Field(default=600.0, description="Seconds per turn.")

    @model_validator(mode="before")
    @classmethod
    def _fold_options(cls, data: Any) -> Any:
        """Accept ``CompilerConfig`` fields (``max_replans=1``) as keyword arguments."""
        if not isinstance(data, dict):
            return data
        require_llm(data.get("llm"))
        overrides = split_config(data)
        if overrides:
            data["config"] = make_config(data.get("config"), overrides)
        return data

    def _engine(self, tools: Sequence[BaseTool], ctx: AgentContext) -> LLMCompilerWorkflow:
        """The workflow that runs one turn."""
        dialect = self.dialect
        if dialect is None:
            dialect = LLMCompilerDialect(
                planner_examples=self.planner_examples, joiner_examples=self.joiner_examples
            )
        return LLMCompilerWorkflow(
            tools=[_stand_in(t) if t.metadata.get_name() == HANDOFF else t for t in tools],
            llm=self.llm,
            config=self.config,
            dialect=dialect,
            system_prompt=self.system_prompt,
            name=self.name,
            timeout=self.compiler_timeout,
            tool_context=ctx,
        )

    async def take_step(
        self,
        ctx: AgentContext,
        llm_input: list[ChatMessage],
        tools: Sequence[AsyncBaseTool],
        memory: BaseMemory,
    ) -> AgentOutput:
        """Run one compiled plan over the conversation; return the answer or a handoff."""
        ctx.write_event_to_stream(AgentInput(input=llm_input, current_agent_name=self.name))
        question, history = _split(llm_input)
        handler = self._engine(tools, ctx).run(user_msg=question, chat_history=history)
        asked: dict[tuple[int, int], dict[str, Any]] = {}  # each task's arguments, by round
        try:
            async for ev in handler.stream_events():
                self._forward(ctx, ev, asked)
            result: CompilerOutput = await handler
        except BaseException:
            if not handler.is_done():
                await handler.cancel_run()
            raise
        direct = result.summary.return_direct
        calls: list[ToolSelection] = []
        if direct is not None and direct.tool == HANDOFF:
            calls = [
                ToolSelection(
                    tool_id=f"{self.name}-{direct.id}",
                    tool_name=HANDOFF,
                    tool_kwargs=direct.args,
                )
            ]
            await ctx.store.set(_notes_key(self.name), _notes(result.summary))
        # A plain AgentOutput: agent workflows route it by its exact type.
        return AgentOutput(
            response=result.response,
            current_agent_name=self.name,
            tool_calls=calls,
            raw=result.raw,
        )

    def _forward(self, ctx: AgentContext, ev: Any, asked: dict[tuple[int, int], Any]) -> None:
        """Re-publish an engine event, plus the agent-level view of each task (`asked`:
        the arguments of the tasks started so far, for their results)."""
        if isinstance(ev, StopEvent):
            return  # the engine's end is not the team's: it would end the outer stream
        ctx.write_event_to_stream(ev)
        if isinstance(ev, TaskReady):
            asked[ev.round, ev.task_id] = ev.args
            ctx.write_event_to_stream(
                ToolCall(tool_name=ev.tool_name, tool_kwargs=ev.args, tool_id=self._tool_id(ev))
            )
        elif isinstance(ev, TaskResult):
            text = ev.output if isinstance(ev.output, str) else str(ev.output)
            args = asked.pop((ev.round, ev.task_id), {})  # none: skipped before it started
            ctx.write_event_to_stream(
                ToolCallResult(
                    tool_name=ev.tool_name,
                    tool_kwargs=args,
                    tool_id=self._tool_id(ev),
                    tool_output=ToolOutput(
                        content=text,
                        tool_name=ev.tool_name,
                        raw_input={"args": (), "kwargs": args},
                        raw_output=ev.output,
                        is_error=ev.is_error,
                    ),
                    return_direct=False,
                )
            )

    def _tool_id(self, ev: TaskReady | TaskResult) -> str:
        return f"{self.name}-{ev.task_id}"

    async def handle_tool_call_results(
        self, ctx: Context, results: list[ToolCallResult], memory: BaseMemory
    ) -> None:
        """Nothing to do: the only tool call this agent returns is the handoff."""

    async def finalize(self, ctx: Context, output: AgentOutput, memory: BaseMemory) -> AgentOutput:
        """Put the answer (or, on a handoff, the compiled results) in the shared memory."""
        notes = await ctx.store.get(_notes_key(self.name), default=None)
        if notes:
            await memory.aput(ChatMessage(role=MessageRole.ASSISTANT, content=notes))
            await ctx.store.set(_notes_key(self.name), None)
        else:
            await memory.aput(output.response)
        return output


def _split(messages: list[ChatMessage]) -> tuple[str, list[ChatMessage]]:
    """The last user message is the question; the rest (no system) is the history."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == MessageRole.USER and messages[i].content:
            history = [m for m in messages[:i] if m.role != MessageRole.SYSTEM]
            later = [
                m
                for m in messages[i + 1 :]
                if m.content and m.role not in (MessageRole.SYSTEM, MessageRole.TOOL)
            ]
            question = messages[i].content or ""
            if later:  # e.g. another agent's work after the question: keep it as context
                question += "\n" + "\n".join(f"{m.role.value}: {m.content}" for m in later)
            return question, history
    raise RunError("The agent was given no user message.")


def _stand_in(handoff: BaseTool) -> BaseTool:
    """The handoff tool as the planner sees it: same schema, no side effect, return_direct."""

    async def handoff_call(to_agent: str, reason: str) -> str:
        return f"Handing off to {to_agent}: {reason}"

    return FunctionTool.from_defaults(
        async_fn=handoff_call,
        name=HANDOFF,
        description=handoff.metadata.description,
        return_direct=True,
    )


def _notes_key(name: str) -> str:
    return f"llm_compiler_notes_{name}"


def _notes(summary: RunSummary) -> str:
    """The compiled results, for the agent that takes over."""
    lines = [
        f"{t.id}. {t.tool}({', '.join(f'{k}={render_value(v)}' for k, v in t.args.items())})"
        f" -> {t.output}"
        for t in summary.tasks
        if t.tool != HANDOFF
    ]
    return "Results gathered before the handoff:\n" + "\n".join(lines) if lines else ""
