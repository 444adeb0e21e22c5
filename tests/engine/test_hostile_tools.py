"""Items 5, 6, 12: tool faults are observations; hung sync tools never starve the pool."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hostile_helpers import FINISH, results

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import ScriptedLLM, run_and_collect
from llm_compiler.tools import ToolThreads, tool_map


@pytest.mark.timeout(20)
@pytest.mark.parametrize("tool_timeout", [None, 5.0])
async def test_a_tool_raising_timeout_error_itself_is_its_own_error(tool_timeout):
    async def flaky(x: str) -> str:
        """Times out on its own."""
        raise TimeoutError("upstream API timed out")

    def flaky_sync(x: str) -> str:
        """Times out on its own, in a thread."""
        raise TimeoutError("socket timed out")

    plan = '1. flaky("a")\n2. flaky_sync("b")\n3. join()'
    llm = ScriptedLLM([plan, FINISH.format("ok")])
    wf = LLMCompilerWorkflow(
        tools=[flaky, flaky_sync], llm=llm, tool_timeout=tool_timeout, timeout=15
    )
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "ok"
    done = results(events)
    assert done[1].output == "Error: TimeoutError: upstream API timed out"
    assert done[2].output == "Error: TimeoutError: socket timed out"


@pytest.mark.timeout(30)
async def test_hung_sync_tools_never_starve_later_calls():
    """More hung sync calls than the pool has threads: later calls still run at once."""
    threads = ToolThreads(max_workers=4)
    release = threading.Event()
    hung_started = threading.Semaphore(0)

    def hang(x: str) -> str:
        """Blocks its thread until the test ends."""
        hung_started.release()
        release.wait(30)
        return "late"

    def quick(x: str) -> str:
        """Answers at once."""
        return x.upper()

    tools = list(tool_map([hang, quick], threads).values())

    async def ask(plan: str) -> dict:
        llm = ScriptedLLM([plan, FINISH.format("done")])
        wf = LLMCompilerWorkflow(tools=tools, llm=llm, tool_timeout=0.2, timeout=15)
        out, events = await run_and_collect(wf, user_msg="q")
        assert str(out) == "done"
        return results(events)

    try:
        for round_ in range(3):  # 3 runs x 4 hung calls: 12 threads stuck, pool of 4
            plan = "\n".join(f'{i}. hang("{round_}-{i}")' for i in range(1, 5)) + "\n5. join()"
            done = await ask(plan)
            assert all("timed out" in done[i].output for i in range(1, 5))
            done = await ask('1. quick("ok")\n2. quick("fine")\n3. join()')
            assert [done[1].output, done[2].output] == ["OK", "FINE"]
        assert threads.replaced >= 2
    finally:
        release.set()


@pytest.mark.timeout(20)
async def test_a_tool_returning_none_passes_none():
    seen: list[object] = []

    async def nothing(x: str) -> None:
        """Returns nothing."""

    def show(value: object = "default") -> str:
        """Shows what it got."""
        seen.append(value)
        return repr(value)

    plan = '1. nothing("a")\n2. show($1)\n3. show("got $1")\n4. join()'
    wf = LLMCompilerWorkflow(
        tools=[nothing, show], llm=ScriptedLLM([plan, FINISH.format("ok")]), timeout=15
    )
    out, events = await run_and_collect(wf, user_msg="q")
    done = results(events)
    assert done[1].output is None and not done[1].is_error
    assert seen[0] is None
    assert done[2].output == "None"  # show's own repr of the None it received


async def test_to_tool_threads_are_a_real_pool():
    """The pool given to tool_map runs sync tools in its own threads."""
    threads = ToolThreads(max_workers=2)
    names: list[str] = []

    def who(x: str) -> str:
        """Name of the running thread."""
        names.append(threading.current_thread().name)
        return x

    (tool,) = tool_map([who], threads).values()
    await asyncio.gather(*(tool.acall(x=str(i)) for i in range(4)))
    assert all(n.startswith("llm-compiler-tool") for n in names)


@pytest.mark.timeout(20)
async def test_huge_and_odd_outputs_are_bounded_in_state_and_for_dependents():
    got: list[int] = []

    async def huge(x: str) -> str:
        """Five million characters."""
        return "y" * 5_000_000

    async def many(x: str) -> list:
        """A big list."""
        return list(range(200_000))

    async def enormous_int(x: str) -> int:
        """An integer too long to print."""
        return 10**5000

    async def size(value: object) -> int:
        """The length of what it got."""
        got.append(len(value))
        return len(value)

    plan = (
        '1. huge("a")\n2. many("b")\n3. enormous_int("c")\n4. size($1)\n5. size($2)\n'
        "6. size($3)\n7. join()"
    )
    llm = ScriptedLLM([plan, FINISH.format("ok")])
    wf = LLMCompilerWorkflow(
        tools=[huge, many, enormous_int, size], llm=llm, timeout=15, max_result_chars=10_000
    )
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "ok"
    done = results(events)
    assert done[1].output.endswith("(4990000 characters cut)")
    assert len(done[1].output) < 10_100 and len(done[2].output) < 10_100
    assert done[3].is_error and "ValueError" in done[3].output
    assert got[0] < 10_100 and done[6].skipped
    assert len(llm.calls[1].prompt) < 20_000
