"""End-to-end behaviour of LLMCompilerWorkflow with scripted LLMs (no network)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from helpers import Gate
from llama_index.core.agent.workflow import AgentOutput, AgentStream
from llama_index.core.llms import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.tools import FunctionTool
from workflows import Context
from workflows.errors import WorkflowCancelledByUser

from llm_compiler import (
    CompilerStream,
    ConfigurationError,
    JoinEvent,
    LLMCallError,
    LLMCompilerWorkflow,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect

FINISH = "Thought: I have it.\nAction: Finish({})"


async def search(query: str) -> str:
    """Look up a topic in the encyclopedia."""
    return f"<{query}>"


def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


def results_by_id(events):
    return {e.task_id: e for e in events_of(events, TaskResult)}


# ----------------------------------------------------------------------------- 1. planner


async def test_chat_planner_prompt_has_tools_join_examples_and_history():
    llm = ScriptedLLM(['1. search("x")\n2. join()<END_OF_PLAN>', FINISH.format("done")])
    wf = LLMCompilerWorkflow(tools=[search, multiply], llm=llm)
    history = [
        ChatMessage(role="user", content="I like cats"),
        ChatMessage(role="assistant", content="Noted: cats"),
    ]
    out, _ = await run_and_collect(wf, user_msg="what now?", chat_history=history)
    assert str(out) == "done" and isinstance(out, AgentOutput)
    plan_call, join_call = llm.calls
    assert plan_call.kind == "chat" and plan_call.stream
    system = plan_call.messages[0].content
    assert "search(query: str): Look up a topic in the encyclopedia." in system
    assert "multiply(a: float, b: float): Multiply two numbers." in system
    assert "3. join()" in system and "Question: Which is older" in system
    roles = [m.role.value for m in plan_call.messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert plan_call.messages[1].content == "I like cats"
    assert "Question: what now?" in plan_call.messages[-1].content
    assert "I like cats" in join_call.prompt and "Observation: <x>" in join_call.prompt


async def test_completion_model_gets_one_prompt_and_custom_examples():
    llm = ScriptedLLM(
        [' search("x")\n2. join()', " ok\nAction: Finish(fine)\n###\nQuestion:"], chat=False
    )
    wf = LLMCompilerWorkflow(
        tools=[search], llm=llm, planner_examples="EXAMPLE-PLAN\n", joiner_examples=""
    )
    # The completion continues the prompt: the model starts mid-line.
    llm._script[0] = '1. search("x")\n2. join()'
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "fine"
    assert [c.kind for c in llm.calls] == ["complete", "complete"]
    assert "EXAMPLE-PLAN" in llm.calls[0].prompt and llm.calls[0].prompt.endswith("Question: q\n")
    assert llm.calls[1].prompt.endswith("Thought:")
    assert "Question: Which is older" not in llm.calls[1].prompt


async def test_plan_events_carry_tasks_deps_thoughts_and_errors():
    plan = 'Thought: both\n1. search("a")\n2. multiply($1, 2)\n3. join()'
    llm = ScriptedLLM([plan, FINISH.format("x")])
    _, events = await run_and_collect(
        LLMCompilerWorkflow(tools=[search, multiply], llm=llm), user_msg="q"
    )
    final = [e for e in events_of(events, PlanEvent) if e.complete]
    assert len(final) == 1 and final[0].join_id == 3 and final[0].thoughts == ["both"]
    t1, t2 = final[0].tasks
    assert t1.thought == "both" and t2.deps == [1] and t2.kwargs == {"a": {"$ref": 1}, "b": 2}
    streamed = [t.id for e in events_of(events, PlanEvent) if not e.complete for t in e.tasks]
    assert streamed == [1, 2]


async def test_tokens_stream_as_agent_stream_events():
    llm = ScriptedLLM(['1. search("a")\n2. join()', FINISH.format("x")])
    handler = LLMCompilerWorkflow(tools=[search], llm=llm, name="researcher").run(user_msg="q")
    tokens = [e async for e in handler.stream_events() if isinstance(e, AgentStream)]
    await handler
    assert all(isinstance(e, CompilerStream) and e.raw["phase"] == e.phase for e in tokens)
    phases = {e.phase for e in tokens}
    wire = tokens[-1].model_dump(mode="json")  # what a workflow server sends
    assert "response" not in wire and wire["phase"] in phases and wire["round"] == 0
    assert phases == {"plan", "join"} and {e.current_agent_name for e in tokens} == {"researcher"}
    assert "".join(e.delta for e in tokens if e.raw["phase"] == "plan").startswith("1. search")


# ----------------------------------------------------------------------------- 2. streaming


class GatedLLM(ScriptedLLM):
    """Holds its stream after a given chunk until a gate opens."""

    hold_after: str = ""

    def __init__(self, script, gate: Gate, hold_after: str, **kw):
        super().__init__(script, **kw)
        self._gate = gate
        self.hold_after = hold_after
        self._seen = ""

    async def on_chunk(self, index, chunk):
        if self.hold_after and self.hold_after in self._seen:
            await self._gate.wait()
            self.hold_after = ""
        self._seen += chunk


async def test_tasks_run_while_the_planner_is_still_writing():
    gate = Gate()

    async def first(query: str) -> str:
        """First lookup; opens the gate the planner waits on."""
        gate.open()
        return "one"

    plan = '1. first("a")\n2. search("b")\n3. join()'
    llm = GatedLLM([plan, FINISH.format("x")], gate, hold_after='("a")\n')
    wf = LLMCompilerWorkflow(tools=[first, search], llm=llm, timeout=10)
    # Deadlocks (and times out) unless task 1 runs before the plan's second line is written.
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "x"
    order = [
        (type(e).__name__, getattr(e, "task_id", None), getattr(e, "complete", None))
        for e in events
        if isinstance(e, (TaskReady, PlanEvent))
    ]
    assert order.index(("TaskReady", 1, None)) < order.index(("PlanEvent", None, True))


# ----------------------------------------------------------------------------- 3. scheduling


async def test_a_task_waits_only_for_its_own_inputs():
    slow_may_finish = Gate()

    async def fast(x: str) -> str:
        """Fast."""
        return "f"

    async def slow(x: str) -> str:
        """Slow: finishes only after the dependent of fast has run."""
        await slow_may_finish.wait()
        return "s"

    async def after_fast(x: str) -> str:
        """Needs fast only."""
        slow_may_finish.open()
        return x + "!"

    plan = '1. fast("a")\n2. slow("b")\n3. after_fast($1)\n4. join()'
    llm = ScriptedLLM([plan, FINISH.format("ok")])
    wf = LLMCompilerWorkflow(tools=[fast, slow, after_fast], llm=llm, timeout=10)
    _, events = await run_and_collect(wf, user_msg="q")
    res = results_by_id(events)
    assert res[3].output == "f!" and res[2].output == "s"
    assert res[3].finished_at <= res[2].finished_at


async def test_independent_tasks_run_concurrently_up_to_max_concurrency():
    running, peak = 0, 0
    all_started = Gate()

    async def work(i: int) -> int:
        """Work."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if peak == 3:
            all_started.open()
        await all_started.wait()
        running -= 1
        return i

    plan = "\n".join(f"{i}. work({i})" for i in range(1, 7)) + "\n7. join()"
    wf = LLMCompilerWorkflow(
        tools=[work], llm=ScriptedLLM([plan, FINISH.format("x")]), max_concurrency=3, timeout=10
    )
    _, events = await run_and_collect(wf, user_msg="q")
    assert peak == 3
    assert sorted(e.output for e in events_of(events, TaskResult)) == [1, 2, 3, 4, 5, 6]


async def test_sync_tools_run_off_the_event_loop():
    released = threading.Event()

    def blocking(x: str) -> str:
        """Blocks its thread until the async tool has run."""
        assert released.wait(5), "the event loop was blocked"
        return "unblocked"

    async def releaser(x: str) -> str:
        """Releases the blocking tool."""
        released.set()
        return "released"

    plan = '1. blocking("a")\n2. releaser("b")\n3. join()'
    wf = LLMCompilerWorkflow(
        tools=[blocking, releaser], llm=ScriptedLLM([plan, FINISH.format("x")]), timeout=10
    )
    _, events = await run_and_collect(wf, user_msg="q")
    assert results_by_id(events)[1].output == "unblocked"


# ----------------------------------------------------------------------------- 4. references


async def test_references_pass_typed_values_and_interpolate_text():
    seen = {}

    def record(value: float, note: str, items: list) -> str:
        """Record arguments."""
        seen.update(value=value, note=note, items=items)
        return "ok"

    plan = '1. multiply(1.5, 2)\n2. record($1, "got $1 of $10 and ${1}", [$1, "$1"])\n3. join()'
    wf = LLMCompilerWorkflow(tools=[multiply, record], llm=ScriptedLLM([plan, FINISH.format("x")]))
    _, events = await run_and_collect(wf, user_msg="q")
    assert seen["value"] == 3.0 and isinstance(seen["value"], float)
    assert seen["note"] == "got 3.0 of $10 and 3.0"
    assert seen["items"] == [3.0, 3.0]
    assert events_of(events, TaskReady)[1].args["value"] == 3.0


# ----------------------------------------------------------------------------- 5. failures


async def test_failing_and_hanging_tools_are_data_and_dependents_are_skipped():
    async def boom(x: str) -> str:
        """Always fails."""
        raise RuntimeError("database is down")

    async def hang(x: str) -> str:
        """Never returns."""
        await asyncio.Event().wait()
        return "never"

    plan = (
        '1. boom("a")\n2. search($1)\n3. multiply($2, 2)\n4. hang("b")\n5. search("ok")\n6. join()'
    )
    llm = ScriptedLLM([plan, FINISH.format("partial")])
    wf = LLMCompilerWorkflow(
        tools=[boom, hang, search, multiply], llm=llm, tool_timeout=0.2, timeout=10
    )
    out, events = await run_and_collect(wf, user_msg="q")
    res = results_by_id(events)
    assert res[1].is_error and "database is down" in res[1].output
    assert res[2].skipped and "task 1, which failed" in res[2].output
    assert res[3].skipped and "task 2" in res[3].output
    assert res[4].is_error and "timed out after 0.2 s" in res[4].output
    assert res[5].output == "<ok>" and not res[5].is_error
    assert not events_of(events, TaskReady)[1:] or {
        e.task_id for e in events_of(events, TaskReady)
    } == {1, 4, 5}
    joiner_prompt = llm.calls[1].prompt
    assert "database is down" in joiner_prompt and "timed out" in joiner_prompt
    assert str(out) == "partial"


async def test_invalid_plan_lines_become_observations():
    plan = "\n".join(
        [
            '1. nosuchtool("a")',
            '2. search("a", "b")',
            '3. search(q="a")',
            "4. multiply(a=1)",
            "5. search($9)",
            "6. search($6)",
            "7. please do something",
            '8. multiply("x", 2)',
            '8. search("dup")',
            '9. search("fine")',
            "10. join()",
        ]
    )
    llm = ScriptedLLM([plan, FINISH.format("x")])
    wf = LLMCompilerWorkflow(tools=[search, multiply], llm=llm, timeout=10)
    out, events = await run_and_collect(wf, user_msg="q")
    res = results_by_id(events)
    expect = {
        1: "Unknown tool 'nosuchtool'. Available: multiply, search.",
        2: "search takes 1 argument(s) (query) but 2 were given.",
        3: "search has no parameter 'q' (parameters: query).",
        4: "multiply is missing required argument(s): b.",
        5: "references task 9, which is not an earlier task",
        6: "Task 6 references itself",
        7: "is not of the form tool(arguments)",
        8: "Invalid arguments for multiply: a: Input should be a valid number",
    }
    for tid, text in expect.items():
        assert res[tid].is_error and text in res[tid].output, (tid, res[tid].output)
    assert res[9].output == "<fine>"
    final = next(e for e in events_of(events, PlanEvent) if e.complete)
    assert any("reuses task id 8" in e for e in final.errors)
    kinds = {t.id: t.error_kind for t in final.tasks}
    assert kinds == {
        1: "unknown_tool",
        2: "bad_arguments",
        3: "bad_arguments",
        4: "bad_arguments",
        5: "bad_reference",
        6: "bad_reference",
        7: "not_a_call",
        8: "bad_arguments",
        9: None,
    }
    assert final.error_kinds == ["reused_id"]
    assert final.model_dump(mode="json")["tasks"][0]["error_kind"] == "unknown_tool"  # on the wire
    assert "reuses task id 8" in llm.calls[1].prompt
    assert str(out) == "x"


@pytest.mark.parametrize("plan", ["", "I cannot help with that.", '1. search("a")'])
async def test_empty_or_unterminated_plans_still_reach_the_joiner(plan):
    llm = ScriptedLLM([plan, FINISH.format("answered anyway")])
    out, events = await run_and_collect(
        LLMCompilerWorkflow(tools=[search], llm=llm, timeout=10), user_msg="q"
    )
    assert str(out) == "answered anyway"
    final = next(e for e in events_of(events, PlanEvent) if e.complete)
    assert "The plan did not end with join()." in final.errors
    assert "no_join" in final.error_kinds
    assert "Plan error: The plan did not end with join()." in llm.calls[1].prompt


async def test_too_many_tasks_is_an_observation():
    plan = "\n".join(f'{i}. search("{i}")' for i in range(1, 8)) + "\n8. join()"
    llm = ScriptedLLM([plan, FINISH.format("x")])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, max_tasks=5, timeout=10)
    _, events = await run_and_collect(wf, user_msg="q")
    assert len(events_of(events, TaskResult)) == 5
    assert "more than 5 tasks" in llm.calls[1].prompt


@pytest.mark.parametrize("phase", ["planner", "joiner"])
async def test_llm_errors_fail_the_run_clearly(phase):
    boom = ConnectionError("server went away")
    script = [boom] if phase == "planner" else ['1. search("a")\n2. join()', boom]
    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script), timeout=10)
    with pytest.raises(LLMCallError, match=f"The {phase} LLM call of round 0 failed"):
        await wf.run(user_msg="q")


async def test_cancelling_a_run_cancels_its_tools():
    started, cancelled = Gate(), Gate()

    async def forever(x: str) -> str:
        """Runs until cancelled."""
        started.open()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.open()
            raise
        return "never"

    wf = LLMCompilerWorkflow(
        tools=[forever], llm=ScriptedLLM(['1. forever("a")\n2. join()']), timeout=10
    )
    handler = wf.run(user_msg="q")
    await started.wait()
    await handler.cancel_run()
    with pytest.raises(WorkflowCancelledByUser):
        await handler
    await cancelled.wait()


def test_configuration_errors():
    with pytest.raises(ConfigurationError, match="Two tools are named 'search'"):
        LLMCompilerWorkflow(
            tools=[search, FunctionTool.from_defaults(fn=search)], llm=ScriptedLLM([])
        )
    with pytest.raises(ConfigurationError, match="may not be called 'join'"):
        LLMCompilerWorkflow(
            tools=[FunctionTool.from_defaults(fn=search, name="join")], llm=ScriptedLLM([])
        )
    with pytest.raises(ConfigurationError, match="Give tools"):
        LLMCompilerWorkflow(tools=[], llm=ScriptedLLM([]))


# ----------------------------------------------------------------------------- 6./7. join, replan


async def test_replan_continues_numbering_reuses_results_and_counts_in_context():
    calls = []

    async def counted(query: str) -> str:
        """Counted lookup."""
        calls.append(query)
        return f"<{query}>"

    script = [
        '1. counted("a")\n2. counted("b")\n3. join()',
        "Thought: need more\nAction: Replan(look up c using $1)",
        '4. counted("c and $1")\n5. join()',
        "Action: Finish(a, b and c)",
    ]
    llm = ScriptedLLM(script)
    handler = LLMCompilerWorkflow(tools=[counted], llm=llm, max_replans=2).run(user_msg="q")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    out = await handler
    assert str(out) == "a, b and c"
    assert calls == ["a", "b", "c and <a>"]  # nothing ran twice
    replan = events_of(events, ReplanEvent)
    assert len(replan) == 1 and replan[0].round == 1 and replan[0].reason == "look up c using $1"
    assert [e.round for e in events_of(events, JoinEvent)] == [0, 1]
    second_plan = llm.calls[2].prompt
    assert "Observation: <a>" in second_plan and "Replan: look up c using $1" in second_plan
    assert "Number its actions from 4" in second_plan
    state = await handler.ctx.store.get_state()
    assert state.replans == 1 and sorted(state.tasks) == [1, 2, 4]
    assert state.tasks[4].deps == [1] and state.tasks[4].round == 1


async def test_max_replans_is_a_hard_cap_and_the_last_round_finishes():
    script = [
        '1. search("a")\n2. join()',
        "Thought: t1\nAction: Replan(more)",
        '3. search("b")\n4. join()',
        "Thought: I still lack c, best guess is b\nAction: Replan(even more)",
    ]
    llm = ScriptedLLM(script)
    handler = LLMCompilerWorkflow(tools=[search], llm=llm, max_replans=1).run(user_msg="q")
    out = await handler
    assert str(out) == "I still lack c, best guess is b"
    assert len(llm.calls) == 4
    assert "This is the last round" in llm.calls[3].prompt
    assert "This is the last round" not in llm.calls[1].prompt
    assert (await handler.ctx.store.get_state()).replans == 1


async def test_zero_replans_means_the_first_joiner_must_finish():
    llm = ScriptedLLM(['1. search("a")\n2. join()', "Action: Replan(x)"])
    out = await LLMCompilerWorkflow(tools=[search], llm=llm, max_replans=0).run(user_msg="q")
    assert str(out) == "x" and len(llm.calls) == 2


# ----------------------------------------------------------------------------- 8. conversation


async def test_memory_and_a_second_run_on_the_same_context_continue_the_conversation():
    llm = ScriptedLLM(
        [
            '1. search("cats")\n2. join()',
            FINISH.format("Cats purr."),
            '1. search("dogs")\n2. join()',
            FINISH.format("Dogs bark."),
        ]
    )
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    ctx = Context(wf)
    assert str(await wf.run(user_msg="tell me about cats", ctx=ctx)) == "Cats purr."
    assert str(await wf.run(user_msg="and dogs?", ctx=ctx)) == "Dogs bark."
    third_plan = llm.calls[2]
    contents = [m.content for m in third_plan.messages]
    assert contents[1:3] == ["tell me about cats", "Cats purr."]
    state = await ctx.store.get_state()
    assert [m.content for m in state.transcript] == [
        "tell me about cats",
        "Cats purr.",
        "and dogs?",
        "Dogs bark.",
    ]


async def test_given_memory_receives_the_question_and_answer():
    memory = ChatMemoryBuffer.from_defaults(
        chat_history=[ChatMessage(role="user", content="earlier")]
    )
    llm = ScriptedLLM(['1. search("a")\n2. join()', FINISH.format("the answer")])
    await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="now", memory=memory)
    assert [m.content for m in memory.get_all()] == ["earlier", "now", "the answer"]
    assert "earlier" in llm.calls[0].prompt and "earlier" in llm.calls[1].prompt


async def test_context_survives_serialization_between_runs():
    import json

    llm = ScriptedLLM(
        [
            '1. search("a")\n2. join()',
            FINISH.format("first"),
            '1. search("b")\n2. join()',
            FINISH.format("second"),
        ]
    )
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    ctx = Context(wf)
    await wf.run(user_msg="one", ctx=ctx)
    restored = Context.from_dict(wf, json.loads(json.dumps(ctx.to_dict())))
    assert str(await wf.run(user_msg="two", ctx=restored)) == "second"
    assert "first" in llm.calls[2].prompt


# ----------------------------------------------------------------------------- 9./10. scale


async def test_one_instance_serves_concurrent_runs_without_sharing_state():
    def script(call):
        q = call.prompt.rsplit("Question: ", 1)[1].split("\n")[0]
        if call.messages[0].content.startswith("Given a question"):
            return f'1. search("{q}")\n2. search("{q}-2")\n3. join()'
        obs = call.messages[-1].content.split("Observation: ")[1].split("\n")[0]
        return f"Action: Finish({obs})"

    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script))
    outs = await asyncio.gather(*(wf.run(user_msg=f"q{i}") for i in range(20)))
    assert [str(o) for o in outs] == [f"<q{i}>" for i in range(20)]


async def test_a_plan_of_hundreds_of_tasks_runs_with_small_overhead():
    n = 300
    plan = "\n".join(f"{i}. multiply({i}, 2)" for i in range(1, n + 1)) + f"\n{n + 1}. join()"
    llm = ScriptedLLM([plan, FINISH.format("done")], tokens_per_chunk=50)
    wf = LLMCompilerWorkflow(
        tools=[multiply], llm=llm, max_tasks=1000, stream_tokens=False, timeout=60
    )
    started = time.perf_counter()
    _, events = await run_and_collect(wf, user_msg="q")
    elapsed = time.perf_counter() - started
    assert sorted(e.output for e in events_of(events, TaskResult)) == [
        2.0 * i for i in range(1, n + 1)
    ]
    assert elapsed / n < 0.05  # generous (5 ms measured): `make bench` reports the overhead


async def test_a_mid_run_snapshot_resumes_in_a_new_context():
    import json

    release, started = asyncio.Event(), asyncio.Event()
    calls = []

    async def slow(x: str) -> str:
        """Slow until released."""
        calls.append(x)
        started.set()
        await release.wait()
        return x.upper()

    plan = '1. slow("a")\n2. slow("b")\n3. slow($1)\n4. join()'
    wf = LLMCompilerWorkflow(
        tools=[slow], llm=ScriptedLLM([plan, FINISH.format("resumed")]), timeout=20
    )
    handler = wf.run(user_msg="q")
    await started.wait()
    snapshot = json.loads(json.dumps(handler.ctx.to_dict()))
    await handler.cancel_run()
    with pytest.raises(WorkflowCancelledByUser):
        await handler
    release.set()
    resumed = wf.run(ctx=Context.from_dict(wf, snapshot))
    assert str(await resumed) == "resumed"
    assert calls.count("A") == 1  # task 3 ran once, after the resumed task 1
    state = await resumed.ctx.store.get_state()
    assert state.outcomes[3].output == "A"


async def test_a_tool_retriever_chooses_extra_tools_per_question():
    class Retriever:
        """Duck-typed ObjectRetriever: returns the multiply tool for math questions."""

        def __init__(self):
            self.queries = []

        async def aretrieve(self, query):
            self.queries.append(query)
            return [FunctionTool.from_defaults(fn=multiply)] if "times" in query else []

    retriever = Retriever()
    llm = ScriptedLLM(["1. multiply(6, 7)\n2. join()", FINISH.format("42")])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, tool_retriever=retriever)
    _, events = await run_and_collect(wf, user_msg="6 times 7?")
    assert results_by_id(events)[1].output == 42
    assert "multiply(a: float, b: float)" in llm.calls[0].messages[0].content
    llm2 = ScriptedLLM(["1. multiply(6, 7)\n2. join()", FINISH.format("no")])
    wf2 = LLMCompilerWorkflow(tools=[search], llm=llm2, tool_retriever=retriever)
    _, events = await run_and_collect(wf2, user_msg="hello")
    assert "Unknown tool 'multiply'" in results_by_id(events)[1].output
    assert retriever.queries == ["6 times 7?", "hello"]


async def test_a_text_result_with_commas_stays_one_argument():
    seen = []

    def pair() -> str:
        """Returns text with a comma."""
        return "3, 4"

    def echo(value: str) -> str:
        """Echo one value."""
        seen.append(value)
        return value

    plan = "1. pair()\n2. echo($1)\n3. join()"
    wf = LLMCompilerWorkflow(tools=[pair, echo], llm=ScriptedLLM([plan, FINISH.format("x")]))
    await wf.run(user_msg="q")
    assert seen == ["3, 4"]


async def test_a_run_makes_its_memory_on_the_loop_once_the_tokenizer_is_loaded(monkeypatch):
    """The first memory is made in a thread (its tokenizer reads a file); once the
    tokenizer is loaded a run hops to no thread for it (a hop costs more than the work)."""
    from llama_index.core.utils import get_tokenizer

    from llm_compiler.engine import workflow as module

    get_tokenizer()
    hops = []

    async def to_thread(fn, /, *args, **kwargs):
        made = fn(*args, **kwargs)
        hops.append(type(made))
        return made

    monkeypatch.setattr(module.asyncio, "to_thread", to_thread)  # every module's
    llm = ScriptedLLM(['1. search("a")\n2. join()', FINISH.format("the answer")])
    out = await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="now")
    assert str(out) == "the answer"
    assert ChatMemoryBuffer not in hops
