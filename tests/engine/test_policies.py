"""Tool policies in scripted runs: one task held for approval while the rest runs,
verdicts (approve, edit, reject, forged), resource keys and limits that never overlap,
retries by side-effect class, and the policy shown in the compiled plan and the events."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from llama_index.core.agent.workflow import AgentStream

from llm_compiler import (
    AwaitingApproval,
    LLMCompilerWorkflow,
    TaskApprovalRequest,
    TaskApprovalResponse,
    TaskReady,
    TaskResult,
    TaskStarted,
    TaskWaiting,
    ToolPolicy,
    policy,
    with_policy,
)
from llm_compiler.errors import ConfigurationError
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: done.\nAction: Finish(ok)"


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


class Ledger:
    """Tools that record their calls; `pay` waits for the test to let it finish."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.llm: ScriptedLLM | None = None

    def tools(self) -> list[Any]:
        async def lookup(q: str) -> str:
            """Look a thing up."""
            self.calls.append(("lookup", q))
            return f"<{q}>"

        @policy(side_effect="at_most_once", requires_approval=True)
        async def pay(amount: int) -> str:
            """Pay an amount."""
            self.calls.append(("pay", amount))
            return f"paid {amount}"

        async def note(text: str) -> str:
            """Write a note."""
            self.calls.append(("note", text))
            return "noted"

        return [lookup, pay, note]


PLAN = '1. lookup("a")\n2. pay(10)\n3. lookup("b")\n4. note($2)\n5. join()'


async def held_run(verdict: dict[str, Any], plan: str = PLAN) -> tuple[Any, list[Any], Ledger]:
    """Run `plan`; answer the held task with `verdict` once nothing else can run."""
    ledger = Ledger()
    llm = ScriptedLLM([plan, FINISH])
    ledger.llm = llm
    wf = LLMCompilerWorkflow(tools=ledger.tools(), llm=llm)
    handler = wf.run(user_msg="pay?")
    events: list[Any] = []
    request: TaskApprovalRequest | None = None
    async for ev in handler.stream_events():
        if isinstance(ev, AgentStream):
            continue
        events.append(ev)
        if isinstance(ev, TaskApprovalRequest):
            request = ev
        if isinstance(ev, AwaitingApproval):  # only the held task is left
            assert request is not None and ("pay", 10) not in ledger.calls
            assert {r.task_id for r in of(events, TaskResult)} == {1, 3}  # the others ran
            response = request.respond(**verdict)
            events.append(response)
            handler.ctx.send_event(response)
    return await handler, events, ledger


async def test_a_held_task_waits_while_the_rest_runs_then_runs_approved():
    out, events, ledger = await held_run({})
    (request,) = of(events, TaskApprovalRequest)
    (awaiting,) = of(events, AwaitingApproval)  # once: when only the held task was left
    assert awaiting.task_ids == [2]
    before = events[: events.index(awaiting)]
    assert {r.task_id for r in of(before, TaskResult)} == {1, 3}
    assert (request.task_id, request.tool_name, request.args) == (2, "pay", {"amount": 10})
    assert request.approval_id.endswith(":0:2") and request.policy["side_effect"] == "at_most_once"
    assert str(out) == "ok" and ledger.calls.count(("pay", 10)) == 1
    assert ("note", "paid 10") in ledger.calls
    order = [c[0] for c in ledger.calls]
    assert order.index("pay") > max(i for i, c in enumerate(order) if c == "lookup")


async def test_an_edited_verdict_runs_with_the_new_arguments():
    out, events, ledger = await held_run({"action": "edit", "args": {"amount": 5}})
    assert ("pay", 5) in ledger.calls and ("pay", 10) not in ledger.calls
    assert ("note", "paid 5") in ledger.calls


async def test_a_rejected_task_is_an_error_observation_and_its_dependents_are_skipped():
    out, events, ledger = await held_run({"action": "reject", "reason": "too much"})
    results = {r.task_id: r for r in of(events, TaskResult)}
    assert (
        results[2].is_error and "rejected" in results[2].output and "too much" in results[2].output
    )
    assert results[4].skipped and all(c[0] != "pay" and c[0] != "note" for c in ledger.calls)
    assert ledger.llm is not None  # the joiner reads the rejection as task 2's observation
    assert "a human rejected this call: too much" in ledger.llm.calls[-1].prompt


async def test_an_edit_that_does_not_fit_the_schema_is_an_error_observation():
    out, events, ledger = await held_run({"action": "edit", "args": {"amount": "lots"}})
    results = {r.task_id: r for r in of(events, TaskResult)}
    assert results[2].is_error and "Invalid arguments for pay" in results[2].output
    assert all(c[0] != "pay" for c in ledger.calls)


async def test_forged_and_repeated_verdicts_change_nothing():
    ledger = Ledger()
    wf = LLMCompilerWorkflow(tools=ledger.tools(), llm=ScriptedLLM([PLAN, FINISH]))
    handler = wf.run(user_msg="pay?")
    async for ev in handler.stream_events():
        if isinstance(ev, TaskApprovalRequest):
            forged = {"action": "edit", "args": {"amount": 999}}
            send = handler.ctx.send_event
            send(TaskApprovalResponse(run_id="other", round=0, task_id=2, **forged))
            send(TaskApprovalResponse(run_id=ev.run_id, round=0, task_id=1, **forged))  # not held
            send(TaskApprovalResponse(run_id=ev.run_id, round=1, task_id=2, **forged))
            send(ev.respond())
            send(ev.respond())  # a double click
            send(ev.respond(action="reject"))  # too late
    assert str(await handler) == "ok"
    assert [c for c in ledger.calls if c[0] == "pay"] == [("pay", 10)]


async def test_plan_level_approval_still_holds_the_whole_plan():
    ledger = Ledger()
    wf = LLMCompilerWorkflow(tools=ledger.tools(), llm=ScriptedLLM([PLAN, FINISH]))
    handler = wf.run(user_msg="pay?", mode="approve")
    async for ev in handler.stream_events():
        if type(ev).__name__ == "PlanApprovalRequest":
            assert ledger.calls == [] and ev.plan.policies["pay"]["requires_approval"]
            handler.ctx.send_event(ev.respond())
        elif isinstance(ev, TaskApprovalRequest):
            handler.ctx.send_event(ev.respond())
    assert str(await handler) == "ok" and ("pay", 10) in ledger.calls


async def test_the_compiled_plan_shows_each_tools_policy():
    wf = LLMCompilerWorkflow(tools=Ledger().tools(), llm=ScriptedLLM([PLAN]))
    plan = await wf.compile_plan("pay?")
    assert plan.policies["pay"]["requires_approval"] is True
    assert plan.policies["lookup"]["side_effect"] == "at_most_once"  # the default


class Overlap:
    """Counts calls in flight per key; each call waits until `release` is set."""

    def __init__(self) -> None:
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.started: list[str] = []
        self.release = asyncio.Event()
        self.changed = asyncio.Event()

    async def when_started(self, n: int) -> None:
        """Return once `n` calls have started (no polling: each start wakes it)."""
        while len(self.started) < n:
            self.changed.clear()
            await self.changed.wait()

    async def hold(self, key: str) -> None:
        self.now[key] += 1
        self.peak[key] = max(self.peak[key], self.now[key])
        self.started.append(key)
        self.changed.set()
        try:
            await self.release.wait()
        finally:
            self.now[key] -= 1


async def test_two_writes_to_one_account_never_overlap_while_others_run():
    seen = Overlap()

    @policy(side_effect="idempotent", resource_keys=("account:{account}",))
    async def write(account: str, amount: int) -> str:
        """Write to an account."""
        await seen.hold(f"account:{account}")
        return f"{account}+{amount}"

    plan = '1. write("A", 1)\n2. write("A", 2)\n3. write("B", 3)\n4. join()'
    wf = LLMCompilerWorkflow(tools=[write], llm=ScriptedLLM([plan, FINISH]))
    handler = wf.run(user_msg="write")
    events: list[Any] = []

    async def collect() -> None:
        events.extend([ev async for ev in handler.stream_events()])

    collecting = asyncio.create_task(collect())
    await seen.when_started(2)
    assert sorted(seen.started) == ["account:A", "account:B"]  # 2 waits for 1
    seen.release.set()
    await handler
    await collecting
    assert seen.peak["account:A"] == 1 and len(seen.started) == 3
    (waiting,) = of(events, TaskWaiting)
    assert (waiting.task_id, waiting.slot) == (2, "key:account:A")
    ready = {r.task_id: r for r in of(events, TaskReady)}
    assert ready[2].resource_keys == ["account:A"] and ready[2].waited >= 0


async def test_a_tool_limit_and_a_shared_limit_bind_together():
    seen = Overlap()

    async def slow(n: int) -> int:
        """A slow call."""
        await seen.hold("slow")
        return n

    async def fast(n: int) -> int:
        """A call of the same server."""
        await seen.hold("fast")
        return n

    with_policy(slow, max_concurrency=1, limits={"server": 2}, side_effect="pure")
    with_policy(fast, limits={"server": 2}, side_effect="pure")
    plan = "1. slow(1)\n2. slow(2)\n3. fast(3)\n4. fast(4)\n5. fast(5)\n6. join()"
    wf = LLMCompilerWorkflow(tools=[slow, fast], llm=ScriptedLLM([plan, FINISH]))
    handler = wf.run(user_msg="go")
    await seen.when_started(2)
    assert seen.now["slow"] == 1 and seen.now["fast"] == 1  # server limit 2, slow 1
    seen.release.set()
    await handler
    assert seen.peak["slow"] == 1 and seen.peak["slow"] + seen.peak["fast"] <= 2
    assert len(seen.started) == 5


class Flaky:
    def __init__(self, failures: int, error: type[Exception] = ConnectionError) -> None:
        self.failures, self.error, self.calls = failures, error, 0

    async def __call__(self, q: str) -> str:
        """Fetch a page (fails at first)."""
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error(f"flake {self.calls}")
        return f"page {q}"


async def flaky_run(flaky: Any, **fields: Any) -> tuple[Any, list[Any], list[float], Any]:
    async def fetch(q: str) -> str:
        """Fetch a page."""
        return str(await flaky(q))

    with_policy(fetch, **fields)
    wf = LLMCompilerWorkflow(tools=[fetch], llm=ScriptedLLM(['1. fetch("x")\n2. join()', FINISH]))
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    wf.retry_sleep = record
    handler = wf.run(user_msg="fetch")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    out = await handler
    (result,) = of(events, TaskResult)
    return out, events, slept, result


async def test_a_pure_tool_is_retried_with_backoff_until_it_succeeds():
    flaky = Flaky(2)
    retry = {"attempts": 3, "backoff": 0.5}
    _, events, slept, result = await flaky_run(flaky, side_effect="pure", retry=retry)
    assert flaky.calls == 3 and not result.is_error and result.output == "page x"
    assert result.attempts == 3 and slept == [0.5, 1.0]
    starts = of(events, TaskStarted)  # one per retry
    assert [(s.attempt, s.attempts) for s in starts] == [(2, 3), (3, 3)]
    assert starts[0].error is not None and "flake 1" in starts[0].error
    assert len({s.idempotency_key for s in starts}) == 1  # the same key on every try


async def test_an_at_most_once_tool_is_never_retried():
    flaky = Flaky(1)
    retry = {"attempts": 5}
    _, events, slept, result = await flaky_run(flaky, side_effect="at_most_once", retry=retry)
    assert flaky.calls == 1 and result.is_error and slept == []
    assert not of(events, TaskStarted)
    assert [r.policy["side_effect"] for r in of(events, TaskReady)] == ["at_most_once"]


async def test_only_the_named_errors_are_retried():
    flaky = Flaky(1, error=KeyError)
    retry = {"attempts": 3, "on": ["ConnectionError"]}
    _, _, _, result = await flaky_run(flaky, side_effect="idempotent", retry=retry)
    assert flaky.calls == 1 and result.is_error and result.attempts == 1


async def test_retries_give_up_after_the_last_attempt():
    flaky = Flaky(10)
    _, _, slept, result = await flaky_run(flaky, side_effect="pure", retry={"attempts": 2})
    assert flaky.calls == 2 and result.is_error and "flake 2" in result.output
    assert slept == [0.0]


async def test_policies_in_configuration_replace_the_declared_one():
    ledger = Ledger()
    over = {"pay": ToolPolicy(side_effect="idempotent")}  # no approval: runs at once
    wf = LLMCompilerWorkflow(
        tools=ledger.tools(), llm=ScriptedLLM([PLAN, FINISH]), tool_policies=over
    )
    handler = wf.run(user_msg="pay?")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    await handler
    assert not of(events, TaskApprovalRequest) and ("pay", 10) in ledger.calls
    ready = {r.task_id: r for r in of(events, TaskReady)}
    assert ready[2].policy["side_effect"] == "idempotent"


def test_a_policy_is_given_once_and_checked():
    with pytest.raises(ConfigurationError):
        with_policy(lambda x: x, ToolPolicy(), side_effect="pure")
    with pytest.raises(ConfigurationError):
        with_policy(lambda x: x, side_effect="sometimes")
    with pytest.raises(ConfigurationError):
        with_policy(lambda x: x, limits={"server": 0})


async def test_before_tool_call_is_awaited_before_each_try():
    """A durable runtime's hook: it sees each try's side effect and key before the call."""
    flaky = Flaky(1)
    seen: list[tuple[int, str, int]] = []

    async def fetch(q: str) -> str:
        """Fetch a page."""
        return str(await flaky(q))

    with_policy(fetch, side_effect="idempotent", retry={"attempts": 2})
    wf = LLMCompilerWorkflow(tools=[fetch], llm=ScriptedLLM(['1. fetch("x")\n2. join()', FINISH]))

    async def before(started: TaskStarted) -> None:
        seen.append((started.attempt, started.side_effect, flaky.calls))

    wf.before_tool_call = before
    assert str(await wf.run(user_msg="fetch")) == "ok"
    assert seen == [(1, "idempotent", 0), (2, "idempotent", 1)]  # each before its call


async def test_a_second_task_ready_for_a_running_task_starts_nothing():
    """A resumed run's TaskReady and the scheduler's for the same task (a held task after
    a restart, say): its call starts once."""
    seen = Overlap()

    @policy(side_effect="at_most_once")
    async def pay(amount: int) -> str:
        """Pay."""
        await seen.hold("pay")
        return "paid"

    wf = LLMCompilerWorkflow(tools=[pay], llm=ScriptedLLM(["1. pay(5)\n2. join()", FINISH]))
    handler = wf.run(user_msg="pay")
    await seen.when_started(1)
    state = await handler.ctx.store.get_state()
    again = TaskReady(round=0, run_id=state.run_id, task_id=1, tool_name="pay")
    handler.ctx.send_event(again)
    handler.ctx.send_event(again.model_copy())
    for _ in range(20):  # let the duplicates reach the executor (no sleeps: loop turns)
        await asyncio.sleep(0)
    seen.release.set()
    assert str(await handler) == "ok" and seen.started == ["pay"]
