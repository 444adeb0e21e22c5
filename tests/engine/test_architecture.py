"""The shape of the engine: dialects, configuration, per-run tools, summaries, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from llama_index.core.objects import ObjectRetriever
from llama_index.core.tools import BaseTool, FunctionTool
from workflows import Context

from llm_compiler import (
    CompilerConfig,
    ConfigurationError,
    LLMCallError,
    LLMCompilerAgent,
    LLMCompilerWorkflow,
    PlanTask,
    TaskResult,
)
from llm_compiler.dialects import PlanDialect, PlannerContext
from llm_compiler.dialects.base import JoinerDecision, LLMRequest
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.engine.summary import CompilerOutput
from llm_compiler.plan import ref
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect

FINISH = "Thought: ok.\nAction: Finish({})"


async def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


# ------------------------------------------------------------------ a second dialect


@dataclass
class _LineStream:
    """`CALL <id> <tool> <json args>` lines; `<id>` may be referenced as {"from": id}."""

    round: int
    done: bool = False
    text: str = ""
    thoughts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    join_id: int | None = None
    _buffer: str = ""

    def feed(self, delta: str) -> list[PlanTask]:
        self.text += delta
        self._buffer += delta
        out = []
        while "\n" in self._buffer and not self.done:
            line, self._buffer = self._buffer.split("\n", 1)
            out += self._line(line)
        return out

    def finish(self) -> list[PlanTask]:
        out = self._line(self._buffer) if not self.done else []
        self.done = True
        return out

    def _line(self, line: str) -> list[PlanTask]:
        parts = line.split(" ", 3)
        if parts[0] == "END":
            self.done = True
            return []
        if parts[0] != "CALL" or len(parts) < 4:
            return []
        tid, tool, args = int(parts[1]), parts[2], json.loads(parts[3])
        kwargs = {k: ref(v["from"]) if isinstance(v, dict) else v for k, v in args.items()}
        deps = [v["from"] for v in args.values() if isinstance(v, dict)]
        return [PlanTask(id=tid, tool=tool, kwargs=kwargs, deps=deps, round=self.round)]


@dataclass(frozen=True)
class LineDialect:
    """A plan format the engine has never seen, defined entirely in this test."""

    name: str = "lines"

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        tools = ", ".join(t.metadata.get_name() for t in context.tools)
        return LLMRequest(prompt=f"TOOLS {tools}\nQ {context.prompt.question}\n")

    def plan_parser(self, context: PlannerContext) -> _LineStream:
        return _LineStream(round=context.round)

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        seen = [t.observation for r in context.rounds for t in r.tasks]
        return LLMRequest(prompt=f"OBS {seen}\n", extras={"grammar": "root ::= [a-z ]+"})

    def parse_decision(self, text: str) -> JoinerDecision:
        return JoinerDecision("finish", text.removeprefix("ANSWER ").strip())


async def test_a_new_dialect_runs_through_the_unchanged_engine():
    assert isinstance(LineDialect(), PlanDialect)
    llm = ScriptedLLM(
        [
            'CALL 1 search {"query": "a"}\nCALL 2 search {"query": {"from": 1}}\nEND\n',
            "ANSWER a then b",
        ],
        chat=False,
    )
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, dialect=LineDialect())
    out, events = await run_and_collect(wf, user_msg="a then b?")
    assert str(out) == "a then b"
    results = {r.task_id: r.output for r in events_of(events, TaskResult)}
    assert results == {1: "<a>", 2: "<<a>>"}
    assert llm.calls[0].prompt == "TOOLS search\nQ a then b?\n"
    assert "'<a>', '<<a>>'" in llm.calls[1].prompt
    assert llm.calls[1].kwargs.get("extra_body") == {"grammar": "root ::= [a-z ]+"}
    assert isinstance(out, CompilerOutput) and out.summary.dialect == "lines"


async def test_a_parser_bug_is_not_blamed_on_the_llm():
    class Broken(LineDialect):
        def plan_parser(self, context: PlannerContext) -> _LineStream:
            stream = _LineStream(round=0)
            stream.feed = lambda delta: 1 / 0  # type: ignore[method-assign]
            return stream

    wf = LLMCompilerWorkflow(
        tools=[search], llm=ScriptedLLM(["CALL x"], chat=False), dialect=Broken()
    )
    with pytest.raises(ZeroDivisionError):
        await wf.run(user_msg="q")
    failing = LLMCompilerWorkflow(
        tools=[search], llm=ScriptedLLM([RuntimeError("503")], chat=False), dialect=LineDialect()
    )
    with pytest.raises(LLMCallError, match="planner LLM call of round 0 failed: RuntimeError"):
        await failing.run(user_msg="q")


# ------------------------------------------------------------------ configuration


def test_config_is_shared_and_checked():
    cfg = CompilerConfig(max_replans=1, tool_timeout=5)
    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([]), config=cfg, max_tasks=7)
    assert (wf.config.max_replans, wf.config.tool_timeout, wf.config.max_tasks) == (1, 5, 7)
    with pytest.raises(ConfigurationError, match="more than the executor's 64 workers"):
        LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([]), max_concurrency=100)
    with pytest.raises(ConfigurationError, match="max_replans"):
        LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([]), max_replans=-1)
    agent = LLMCompilerAgent(tools=[search], llm=ScriptedLLM([]), max_replans=1, tool_timeout=2)
    assert agent.config == CompilerConfig(max_replans=1, tool_timeout=2)
    with pytest.raises(Exception, match="frozen"):
        cfg.max_replans = 3  # type: ignore[misc]


# ------------------------------------------------------------------ tools per run


async def test_a_tool_raising_timeout_error_itself_is_an_observation():
    async def fetch(url: str) -> str:
        """Fetch a page."""
        raise TimeoutError("read timed out")

    llm = ScriptedLLM(['1. fetch("u")\n2. join()', FINISH.format("no page")])
    wf = LLMCompilerWorkflow(tools=[fetch], llm=llm, tool_timeout=None)
    out, events = await run_and_collect(wf, user_msg="get u")
    (result,) = events_of(events, TaskResult)
    assert str(out) == "no page"
    assert result.is_error and result.output == "Error: TimeoutError: read timed out"


class PerUser(ObjectRetriever[BaseTool]):
    """Each user gets their own `balance` tool (same name, different function)."""

    def __init__(self) -> None:
        self.calls = 0

    def retrieve(self, str_or_query_bundle: object) -> list[BaseTool]:
        self.calls += 1
        user = str(getattr(str_or_query_bundle, "query_str", str_or_query_bundle)).split()[0]

        def balance() -> str:
            """The user's balance."""
            return f"balance of {user}"

        return [FunctionTool.from_defaults(fn=balance, name="balance")]

    async def aretrieve(self, str_or_query_bundle: object) -> list[BaseTool]:
        return self.retrieve(str_or_query_bundle)


async def test_retrieved_tools_belong_to_their_run():
    plan = "1. balance()\n2. join()"
    llm = ScriptedLLM(lambda c: FINISH.format("x") if "Action: Finish(" in c.prompt else plan)
    retriever = PerUser()
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, tool_retriever=retriever)
    _, alice = await run_and_collect(wf, user_msg="alice balance?")
    _, bob = await run_and_collect(wf, user_msg="bob balance?")
    assert events_of(alice, TaskResult)[0].output == "balance of alice"
    assert events_of(bob, TaskResult)[0].output == "balance of bob"  # not alice's function
    assert set(wf.tools) == {"search"}  # nothing retrieved is kept on the instance


async def test_a_run_resumed_on_a_fresh_instance_retrieves_its_tools_again():
    def script(call):
        joiner = "Action: Finish(" in call.prompt
        return FINISH.format("done") if joiner else "1. balance()\n2. join()"

    first = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script), tool_retriever=PerUser())
    handler = first.run(user_msg="carol balance?")
    snapshot = None
    async for ev in handler.stream_events():
        if isinstance(ev, TaskResult):
            snapshot = json.loads(json.dumps(handler.ctx.to_dict()))  # mid-run, before join
    await handler
    assert snapshot is not None and snapshot["is_running"]
    retriever = PerUser()
    fresh = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script), tool_retriever=retriever)
    ctx = Context.from_dict(fresh, snapshot)
    state = await ctx.store.get_state()
    assert not hasattr(state, "toolset") and state.tool_names == ["search", "balance"]
    out = await fresh.run(ctx=ctx)  # resumes where the snapshot was taken
    assert str(out) == "done" and retriever.calls == 1


async def test_the_typed_summary_reports_every_task():
    def broken(x: str) -> str:
        """Always fails."""
        raise ValueError("nope")

    llm = ScriptedLLM(
        ['1. search("a")\n2. broken("b")\n3. search($2)\n4. join()', FINISH.format("a")]
    )
    out, _ = await run_and_collect(
        LLMCompilerWorkflow(tools=[search, broken], llm=llm), user_msg="q"
    )
    summary = out.summary
    assert [(t.id, t.tool, t.status) for t in summary.tasks] == [
        (1, "search", "done"),
        (2, "broken", "error"),
        (3, "search", "skipped"),
    ]
    assert summary.tasks[0].output == "<a>" and summary.tasks[0].duration >= 0
    assert summary.tasks[2].deps == [2] and summary.answer == "a"
    assert [r.task_ids for r in summary.rounds] == [[1, 2, 3]]
    assert out.raw["tasks"][2]["is_error"] and out.raw["replans"] == 0  # the old raw contract
    assert out.raw["summary"]["tasks"][1]["status"] == "error"


async def test_arguments_that_do_not_fit_the_schema_are_never_dispatched():
    def multiply(a: float, b: float) -> float:
        """Multiply."""
        return a * b

    plan = '1. multiply("x", 2)\n2. multiply("3", 2)\n3. search("q")\n4. multiply($3, 2)\n5. join()'
    llm = ScriptedLLM([plan, FINISH.format("6")])
    _, events = await run_and_collect(
        LLMCompilerWorkflow(tools=[multiply, search], llm=llm), user_msg="q"
    )
    from llm_compiler import TaskReady

    ready = {e.task_id: e.args for e in events_of(events, TaskReady)}
    assert ready == {2: {"a": 3.0, "b": 2.0}, 3: {"query": "q"}}  # validated (coerced) args
    results = {r.task_id: r for r in events_of(events, TaskResult)}
    assert results[1].is_error and "Invalid arguments for multiply: a:" in results[1].output
    assert results[2].output == 6.0
    assert results[4].is_error and "Invalid arguments for multiply: a:" in results[4].output


async def test_completion_joiner_tokens_include_the_prefilled_thought_label():
    from llm_compiler import CompilerStream

    llm = ScriptedLLM(['1. search("a")\n2. join()', " ok.\nAction: Finish(a)"], chat=False)
    handler = LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="q")
    events = [e async for e in handler.stream_events() if isinstance(e, CompilerStream)]
    joined = "".join(e.delta for e in events if e.phase == "join")
    assert str(await handler) == "a"
    assert joined.startswith("Thought: ok.")
