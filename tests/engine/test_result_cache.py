"""The result cache in scripted runs and on its own: a repeated cacheable call runs once in
a run and within its TTL across runs, for its own workflow or namespace only; an
``at_most_once`` call always runs; an error is never served; a served result is a
``TaskResult`` marked ``cached`` in events, summary and spans."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_compiler import LLMCompilerWorkflow, TaskResult, ToolPolicy, policy
from llm_compiler.engine.cache import MemoryCache, ResultCache, cache_key
from llm_compiler.errors import ConfigurationError
from llm_compiler.events import TaskReady
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools import tool_map

FINISH = "Thought: done.\nAction: Finish(ok)"
TOOLS = ("t0", "t1", "t2", "t3")
ARGS = ("a", "b", "c")


class Counting:
    """Tools t0..t3 that count their calls; a call whose argument is in `failing` raises."""

    def __init__(self, failing: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.failing = failing

    def tools(self) -> list[Any]:
        return [self._make(name) for name in TOOLS]

    def _make(self, name: str) -> Any:
        async def tool(q: str) -> str:
            self.calls[(name, q)] += 1
            await asyncio.sleep(0)  # let other calls start meanwhile
            if (name, q) in self.failing:
                raise ValueError(f"{name} failed on {q}")
            return f"{name}({q})"

        tool.__name__ = name
        tool.__doc__ = f"Tool {name}."
        return tool


def plan_of(calls: list[tuple[str, str]]) -> str:
    """A plan of `calls`; a call written again is written positionally (the parser runs a
    cacheable call written the same way twice once, so only its twin in another form
    reaches the cache, which reads both as one call)."""
    seen: set[tuple[str, str]] = set()
    lines = []
    for i, (tool, q) in enumerate(calls, 1):
        lines.append(f'{i}. {tool}("{q}")' if (tool, q) in seen else f'{i}. {tool}(q="{q}")')
        seen.add((tool, q))
    return "\n".join([*lines, f"{len(calls) + 1}. join()<END_OF_PLAN>"])


async def run(wf: LLMCompilerWorkflow) -> tuple[Any, list[TaskResult]]:
    handler = wf.run(user_msg="go")
    results = [ev async for ev in handler.stream_events() if isinstance(ev, TaskResult)]
    return await handler, results


async def test_a_repeated_pure_call_runs_once_and_its_twin_is_marked_cached():
    tools = Counting()
    plan = plan_of([("t0", "a"), ("t0", "a"), ("t1", "a"), ("t1", "a"), ("t0", "b")])
    wf = LLMCompilerWorkflow(
        tools=tools.tools(),
        llm=ScriptedLLM([plan, FINISH]),
        tool_policies={"t0": ToolPolicy(side_effect="pure")},
        result_cache=MemoryCache(),
    )
    out, results = await run(wf)
    assert tools.calls == {("t0", "a"): 1, ("t1", "a"): 2, ("t0", "b"): 1}
    by_id = {r.task_id: r for r in results}
    assert [by_id[i].cached for i in (1, 2, 3, 4, 5)].count(True) == 1
    twin = by_id[1] if by_id[1].cached else by_id[2]
    assert twin.output == "t0(a)" and twin.attempts == 0 and not twin.is_error
    assert not by_id[3].cached and not by_id[4].cached  # at_most_once (the default)
    summary = out.summary
    assert summary.cached_calls == 1 and [t.cached for t in summary.tasks].count(True) == 1


async def test_cache_results_off_runs_every_call():
    tools = Counting()
    wf = LLMCompilerWorkflow(
        tools=tools.tools(),
        llm=ScriptedLLM([plan_of([("t0", "a"), ("t0", "a")]), FINISH]),
        tool_policies={"t0": ToolPolicy(side_effect="pure")},
        cache_results=False,
    )
    out, results = await run(wf)
    assert tools.calls[("t0", "a")] == 2 and not any(r.cached for r in results)
    assert out.summary.cached_calls == 0


async def test_a_result_with_a_ttl_serves_a_new_workflow_of_the_same_namespace():
    tools = Counting()
    store = MemoryCache()
    found = [tool_map(tools.tools())["t0"]]  # the same tool object for both workflows

    rules = {"t0": ToolPolicy(side_effect="pure", cache_ttl=60)}
    for _ in range(2):
        wf = LLMCompilerWorkflow(
            tools=found,
            llm=ScriptedLLM([plan_of([("t0", "a")]), FINISH]),
            tool_policies=rules,
            result_cache=store,
            cache_namespace="counting",
        )
        out, results = await run(wf)
        assert tools.calls[("t0", "a")] == 1
    assert results[0].cached and out.summary.cached_calls == 1 and len(store) == 1


def price_tool(price: float) -> Any:
    """A ``price`` tool that answers `price`; every such tool looks alike to the planner."""

    def price_of(item: str) -> float:
        return price

    price_of.__name__, price_of.__doc__ = "price", "The price of an item."
    return tool_map([price_of])["price"]


async def ask_price(tool: Any, store: Any, namespace: str | None = None) -> TaskResult:
    wf = LLMCompilerWorkflow(
        tools=[tool],
        llm=ScriptedLLM(['1. price(item="tea")\n2. join()<END_OF_PLAN>', FINISH]),
        tool_policies={"price": ToolPolicy(side_effect="pure", cache_ttl=600)},
        result_cache=store,
        **({} if namespace is None else {"cache_namespace": namespace}),
    )
    return (await run(wf))[1][0]


@pytest.mark.parametrize("shared", ["process", "sqlite"])
async def test_two_workflows_with_look_alike_tools_never_serve_each_other(tmp_path, shared):
    """Two workflows of one process, or of one SQLite store, whose ``price`` tools look
    alike: each is answered by its own tool, unless both set one namespace."""
    from llm_compiler.engine.cache_sqlite import SqliteCacheStore

    store = MemoryCache() if shared == "process" else SqliteCacheStore(tmp_path / "c.db")
    cheap, dear = price_tool(1.25), price_tool(9.99)
    assert (await ask_price(cheap, store)).output == 1.25
    mine = await ask_price(dear, store)
    assert mine.output == 9.99 and not mine.cached
    assert (await ask_price(cheap, store, "shop")).output == 1.25  # opted in: shared
    theirs = await ask_price(cheap, store, "shop")
    assert theirs.output == 1.25 and theirs.cached
    assert (await ask_price(dear, store, "other")).output == 9.99
    if isinstance(store, SqliteCacheStore):
        store.close()


async def test_the_default_process_store_keeps_each_workflows_results_apart():
    cheap, dear = price_tool(1.25), price_tool(9.99)
    assert (await ask_price(cheap, None)).output == 1.25
    assert (await ask_price(dear, None)).output == 9.99
    with pytest.raises(ConfigurationError, match="cache_namespace"):
        LLMCompilerWorkflow(tools=[cheap], llm=ScriptedLLM([]), cache_namespace="")


async def test_without_a_ttl_a_later_run_calls_again():
    tools = Counting()
    rules = {"t0": ToolPolicy(side_effect="pure")}
    llm = ScriptedLLM([plan_of([("t0", "a")]), FINISH] * 2)
    store = MemoryCache()
    wf = LLMCompilerWorkflow(tools=tools.tools(), llm=llm, tool_policies=rules, result_cache=store)
    await run(wf)
    await run(wf)
    assert tools.calls[("t0", "a")] == 2 and len(store) == 0


def test_policies_that_would_cache_an_at_most_once_call_are_refused():
    with pytest.raises(ValueError, match="never served from a cache"):
        ToolPolicy(cache=True)
    with pytest.raises(ValueError, match="never served from a cache"):
        ToolPolicy(side_effect="at_most_once", cache_ttl=5)
    with pytest.raises(ValueError, match="needs cache=True"):
        ToolPolicy(side_effect="idempotent", cache_ttl=5)
    with pytest.raises(ConfigurationError):
        policy(cache_ttl=5)
    assert ToolPolicy(side_effect="pure").cacheable
    assert not ToolPolicy(side_effect="pure", cache=False).cacheable
    assert not ToolPolicy(side_effect="idempotent").cacheable
    assert ToolPolicy(side_effect="idempotent", cache=True, cache_ttl=5).cacheable


def test_keys_follow_tool_version_and_canonical_arguments():
    tool = tool_map(Counting().tools())["t0"]
    other = tool_map(Counting().tools())["t1"]
    pure = ToolPolicy(side_effect="pure")
    key = cache_key(tool, pure, {"q": "a", "n": [1, 2]})
    assert key == cache_key(tool, pure, {"n": [1, 2], "q": "a"})  # key order does not matter
    assert key != cache_key(tool, pure, {"q": "a", "n": [2, 1]})
    assert key != cache_key(other, pure, {"q": "a", "n": [1, 2]})
    assert key != cache_key(tool, ToolPolicy(side_effect="pure", version="2"), {"q": "a"})
    assert key != cache_key(tool, pure, {"q": "a", "n": [1, 2]}, owner="namespace:x")
    assert cache_key(tool, pure, {"q": float("nan")}) is None  # no canonical form: not cached
    assert cache_key(tool, pure, {"q": object()}) is None


# ---------------------------------------------------------------- ResultCache on its own


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def ready(task_id: int, tool: str, q: str) -> TaskReady:
    return TaskReady(round=0, run_id="r", task_id=task_id, tool_name=tool, args={"q": q})


def result_of(ev: TaskReady, output: Any, error: bool, clock: Clock) -> TaskResult:
    return TaskResult(
        round=ev.round,
        task_id=ev.task_id,
        tool_name=ev.tool_name,
        output=output,
        is_error=error,
        started_at=clock.now - 1.5,
        finished_at=clock.now,
    )


async def test_an_error_is_never_served_and_a_ttl_expires():
    clock = Clock()
    cache = ResultCache(MemoryCache(), clock=clock)
    tool = tool_map(Counting().tools())["t0"]
    pure = ToolPolicy(side_effect="pure", cache_ttl=10)
    made: list[int] = []
    fail = [True]

    async def call(ev: TaskReady) -> TaskResult:
        made.append(ev.task_id)
        return result_of(ev, "boom" if fail[0] else "ok", fail[0], clock)

    async def ask(run_id: str, task_id: int) -> TaskResult:
        ev = ready(task_id, "t0", "a")
        return await cache.run(run_id, ev, tool, pure, lambda: call(ev))

    assert (await ask("r1", 1)).is_error and (await ask("r1", 2)).is_error
    assert made == [1, 2]  # the failure was not served to task 2
    fail[0] = False
    first = await ask("r1", 3)
    assert not first.cached and (await ask("r1", 4)).cached and made == [1, 2, 3]
    clock.now += 9
    served = await ask("r2", 1)
    assert served.cached and served.saved == pytest.approx(1.5) and made == [1, 2, 3]
    clock.now += 2  # past the TTL: run again
    assert not (await ask("r3", 1)).cached and made == [1, 2, 3, 1]


async def test_concurrent_twins_wait_for_the_first_and_a_failed_first_lets_them_call():
    cache = ResultCache(MemoryCache())
    tool = tool_map(Counting().tools())["t0"]
    pure = ToolPolicy(side_effect="pure")
    gate = asyncio.Event()
    made: list[int] = []

    async def call(ev: TaskReady, error: bool) -> TaskResult:
        made.append(ev.task_id)
        await gate.wait()
        return result_of(ev, "x", error, Clock())

    for error, expected in ((False, [1]), (True, [1, 2, 3])):
        made.clear()
        gate.clear()
        evs = [ready(i, "t0", "a") for i in (1, 2, 3)]
        runs = [
            asyncio.ensure_future(
                cache.run(f"run-{error}", ev, tool, pure, lambda e=ev, f=error: call(e, f))
            )
            for ev in evs
        ]
        await asyncio.sleep(0)
        gate.set()
        results = await asyncio.gather(*runs)
        assert sorted(made) == expected
        assert [r.cached for r in results] == ([False, True, True] if not error else [False] * 3)


# ---------------------------------------------------------------- the property


@st.composite
def rules(draw: st.DrawFn) -> dict[str, ToolPolicy]:
    out = {}
    for tool in TOOLS:
        kind = draw(st.sampled_from(["pure", "pure_ttl", "pure_off", "idem", "idem_on", "amo"]))
        out[tool] = {
            "pure": ToolPolicy(side_effect="pure"),
            "pure_ttl": ToolPolicy(side_effect="pure", cache_ttl=3600),
            "pure_off": ToolPolicy(side_effect="pure", cache=False),
            "idem": ToolPolicy(side_effect="idempotent"),
            "idem_on": ToolPolicy(side_effect="idempotent", cache=True, cache_ttl=3600),
            "amo": ToolPolicy(side_effect="at_most_once"),
        }[kind]
    return out


calls_st = st.lists(
    st.tuples(st.sampled_from(TOOLS), st.sampled_from(ARGS)), min_size=1, max_size=8
)
failing_st = st.frozensets(st.tuples(st.sampled_from(TOOLS), st.sampled_from(ARGS)), max_size=3)


@settings(max_examples=25)
@given(calls_st, calls_st, rules(), failing_st)
def test_property_repeated_cacheable_calls_run_once_at_most_once_always_runs(
    first: list[tuple[str, str]],
    second: list[tuple[str, str]],
    policies: dict[str, ToolPolicy],
    failing: frozenset[tuple[str, str]],
) -> None:
    """Two runs of random plans on one workflow: in each, a cacheable call that succeeds
    runs once, or not at all if the first run made it and its policy has a TTL; every
    other call (at_most_once, not opted in) runs once per line, and a failing cacheable one
    once per distinct writing of it (the parser merges a cacheable call written the same
    way again), never served."""
    tools = Counting(failing)
    llm = ScriptedLLM([plan_of(first), FINISH, plan_of(second), FINISH])
    wf = LLMCompilerWorkflow(
        tools=tools.tools(), llm=llm, tool_policies=policies, result_cache=MemoryCache()
    )

    async def both() -> None:
        kept: set[tuple[str, str]] = set()
        for plan in (first, second):
            tools.calls.clear()
            _, results = await run(wf)
            for call, n in Counter(plan).items():
                rule = policies[call[0]]
                if not rule.cacheable:
                    expected = n  # each line is a task
                elif call in failing:
                    expected = min(n, 2)  # its third writing repeats the second: merged
                else:
                    expected = 0 if call in kept else 1
                assert tools.calls[call] == expected, (call, rule, n)
            for r in results:
                call = (r.tool_name, plan[r.task_id - 1][1])
                if r.cached:
                    assert policies[r.tool_name].cacheable and call not in failing
                    assert policies[r.tool_name].side_effect != "at_most_once"
            kept |= {c for c in plan if policies[c[0]].cache_ttl and c not in failing}

    asyncio.run(both())


async def test_serve_no_result_cache_turns_it_off_for_each_compiler():
    from llm_compiler.cli import apply_tool_policies, parse

    assert parse(["serve", "--no-result-cache"]).result_cache is False
    assert parse(["serve"], environ={}).result_cache is True
    assert parse(["serve"], environ={"LLM_COMPILER_RESULT_CACHE": "0"}).result_cache is False
    tools = Counting()
    rules = {"t0": ToolPolicy(side_effect="pure")}
    llm = ScriptedLLM([plan_of([("t0", "a"), ("t0", "a")]), FINISH])
    wf = LLMCompilerWorkflow(tools=tools.tools(), llm=llm, tool_policies=rules)
    apply_tool_policies({"compiler": wf}, {}, cache_results=False)
    assert wf.config.tool_policies == rules  # kept
    await run(wf)
    assert tools.calls[("t0", "a")] == 2


async def test_a_sqlite_store_serves_another_workers_result_within_its_ttl(tmp_path):
    from llm_compiler.engine.cache import Entry
    from llm_compiler.engine.cache_sqlite import SqliteCacheStore

    path = tmp_path / "runs.db"
    tools = Counting()
    found = tool_map(tools.tools())["t0"]
    rules = {"t0": ToolPolicy(side_effect="pure", cache_ttl=60)}
    for worker in range(2):  # two stores on one file: two workers
        with SqliteCacheStore(path) as store:
            wf = LLMCompilerWorkflow(
                tools=[found],
                llm=ScriptedLLM([plan_of([("t0", "a")]), FINISH]),
                tool_policies=rules,
                result_cache=store,
                cache_namespace="counting",
            )
            out, results = await run(wf)
            assert results[0].cached == (worker == 1) and results[0].output == "t0(a)"
    assert tools.calls[("t0", "a")] == 1
    with SqliteCacheStore(path) as store:
        await store.put("k", Entry({"x": [1]}, 0.5, 100.0))
        assert await store.get("k", 99.0) == Entry({"x": [1]}, 0.5, 100.0)
        assert await store.get("k", 100.0) is None and await store.get("k", 1.0) is None
        await store.put("bad", Entry({1, 2}, 0.1, 100.0))  # no JSON form: not stored
        assert await store.get("bad", 1.0) is None


@st.composite
def timed_rules(draw: st.DrawFn) -> dict[str, ToolPolicy]:
    """Random policies with random TTLs (None: within a run only)."""
    out = {}
    for tool in TOOLS:
        ttl = draw(st.sampled_from([None, 5.0, 60.0]))
        out[tool] = draw(
            st.sampled_from(
                [
                    ToolPolicy(side_effect="pure", cache_ttl=ttl),
                    ToolPolicy(side_effect="pure", cache=False),
                    ToolPolicy(side_effect="idempotent"),
                    ToolPolicy(side_effect="idempotent", cache=True, cache_ttl=ttl),
                    ToolPolicy(side_effect="at_most_once"),
                ]
            )
        )
    return out


steps_st = st.lists(
    st.tuples(
        st.integers(0, 1),  # the worker (its own ResultCache, one shared store)
        st.integers(0, 2),  # the run of that worker
        st.sampled_from(TOOLS),
        st.sampled_from(ARGS),
        st.booleans(),  # the call fails
        st.sampled_from([0.0, 1.0, 4.0, 30.0]),  # seconds passing before it
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=25)
@given(steps_st, timed_rules())
def test_property_a_call_is_served_exactly_when_made_in_its_run_or_within_its_ttl(
    steps: list[tuple[int, int, str, str, bool, float]], policies: dict[str, ToolPolicy]
) -> None:
    """Two workers sharing a store, random calls on a moving clock: a call is served from
    cache exactly when a successful equal call was made earlier in its run, or (with a TTL)
    anywhere less than the TTL ago; an ``at_most_once`` or not opted-in call never is; an
    error is never served."""
    clock = Clock()
    store = MemoryCache()
    workers = [ResultCache(store, clock=clock) for _ in range(2)]
    found = tool_map(Counting().tools())
    in_run: set[tuple[int, int, str, str]] = set()
    expires: dict[tuple[str, str], float] = {}

    async def play() -> None:
        for n, (worker, run_id, tool, arg, fails, later) in enumerate(steps):
            clock.now += later
            rule = policies[tool]
            ev = ready(n + 1, tool, arg)
            made: list[int] = []

            async def call(
                ev: TaskReady = ev, fails: bool = fails, made: list[int] = made
            ) -> TaskResult:
                made.append(ev.task_id)
                return result_of(ev, f"{ev.tool_name}({ev.args['q']})", fails, clock)

            got = await workers[worker].run(f"run{run_id}", ev, found[tool], rule, call)
            mine = (worker, run_id, tool, arg)
            expected = rule.cacheable and (
                mine in in_run or expires.get((tool, arg), float("-inf")) > clock.now
            )
            assert got.cached == expected and (not made) == expected, (n, rule, mine)
            if got.cached:
                assert rule.side_effect != "at_most_once" and not got.is_error
            elif rule.cacheable and not fails:
                in_run.add(mine)
                if rule.cache_ttl is not None:
                    expires[(tool, arg)] = clock.now + rule.cache_ttl
            if expected:
                in_run.add(mine)

    asyncio.run(play())
