"""Serve an ``AgentWorkflow`` team of ``LLMCompilerAgent`` on the workflow server.

llama-agents-server 0.8.0 persists every event it routes, and it cannot serialize
``AgentWorkflowStartEvent`` (a team's run fails before its first step). :class:`ServedTeam`
runs the team as a nested run inside one step of a workflow whose start event is
:class:`~llm_compiler.events.CompilerStartEvent`, and re-publishes the compiler's own
events (plan, tasks, tokens, join, replan), so the page and clients see the team's plans.
"""

from __future__ import annotations

from llama_index.core.agent.workflow import AgentWorkflow
from workflows import Context, Workflow, step
from workflows.events import StopEvent

from llm_compiler.events import (
    CompilerStartEvent,
    CompilerStream,
    JoinEvent,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)

FORWARDED = (PlanEvent, TaskReady, TaskResult, JoinEvent, ReplanEvent, CompilerStream)


class ServedTeam(Workflow):
    """A team behind a serializable start event; its compiler events on this run's stream.

    Args:
        team: The ``AgentWorkflow`` to run for each question.
        timeout: This workflow's timeout in seconds (the team keeps its own).
    """

    def __init__(self, team: AgentWorkflow, timeout: float | None = 600.0) -> None:
        super().__init__(timeout=timeout)
        self.team = team

    @step
    async def answer(self, ctx: Context, ev: CompilerStartEvent) -> StopEvent:
        """Run the team on the question; forward its compiler events; return its output."""
        question = (
            ev.user_msg if isinstance(ev.user_msg, str) else getattr(ev.user_msg, "content", "")
        )
        await ctx.store.set("question", question or "")  # for the page's run list
        handler = self.team.run(user_msg=ev.user_msg, chat_history=ev.chat_history)
        try:
            async for inner in handler.stream_events():
                if isinstance(inner, FORWARDED):
                    ctx.write_event_to_stream(inner)
            return StopEvent(result=await handler)
        finally:
            if not handler.is_done():  # this run was cancelled or failed: so is the team's
                await handler.cancel_run()
