"""Who may write for a run, on one real Postgres, the interleavings forced in process:
workers started together on an empty database; live readers see committed events only;
an event sent while its run is let go is delivered; a worker cut from its lock never
starts an at-most-once call another worker started; a run claimed back by its worker is
not ended by its old incarnation; an event handed to an owner taken for dead before it
recorded the event goes to the next owner; a worker taken for dead takes no run until it
is listed again; a run's end is committed with its stream's end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

asyncpg = pytest.importorskip("asyncpg")

from llm_compiler.durable.backend import Durable  # noqa: E402

pytestmark = pytest.mark.timeout(120)


async def wait_until(check: Any, timeout: float = 20.0, what: str = "") -> Any:
    """Poll `check()` (sync or async) until truthy (a test's observer, not product code)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        await asyncio.sleep(0.05)


async def row(database: str, sql: str, *args: Any) -> Any:
    conn = await asyncpg.connect(database)
    try:
        return await conn.fetchrow(sql, *args)
    finally:
        await conn.close()


# ---------------------------------------------------------------- schema


async def test_workers_started_together_on_an_empty_database_all_start(cluster):
    """Six workers launched at once on each of three empty databases: every one starts
    (the tables are created once, under one lock)."""
    from llm_compiler.durable import open_durable

    for _ in range(3):
        database = cluster.new_database()
        durables = [await open_durable(database, worker=f"w{i}") for i in range(6)]
        try:
            await asyncio.gather(*(d.served.launch() for d in durables))
        finally:
            await asyncio.gather(*(d.served.destroy() for d in durables), return_exceptions=True)
        tables = await row(
            database,
            "SELECT count(*) FROM pg_tables WHERE tablename IN"
            " ('llmc_runs', 'llmc_facts', 'llmc_events', 'llmc_inbox', 'llmc_workers')",
        )
        assert tables[0] == 5


# ---------------------------------------------------------------- in-process served workers


@asynccontextmanager
async def served(database: str, name: str, calls: Any, monkeypatch: Any) -> AsyncIterator[Any]:
    """A served worker in this process (the crash app's compiler), its HTTP client."""
    from llm_compiler.durable import open_durable
    from llm_compiler.serving import build_app

    from .crash_app import make

    monkeypatch.setenv("LLMC_CALLS", str(calls.path))
    durable = await open_durable(database, worker=name, idle_release=3600)
    app = build_app({"compiler": make()}, durable=durable)
    await app.server.start()
    transport = httpx.ASGITransport(app=app.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        client.durable = durable  # type: ignore[attr-defined]
        try:
            yield client
        finally:
            await app.server.stop()


async def waiting_run(client: Any) -> str:
    """A run started through `client` that waits for a plan approval; its run id."""
    body = {"start_event": {"user_msg": "alpha, beta and gamma?", "mode": "approve"}}
    r = await client.post("/workflows/compiler/run-nowait", json=body)
    assert r.status_code == 200, r.text
    handler = r.json()["handler_id"]
    run_id = (await client.get(f"/handlers/{handler}")).json()["run_id"]
    store = client.durable.store

    async def asked() -> bool:
        events = await store.query_events(run_id)
        return any(e.event.type == "PlanApprovalRequest" for e in events)

    await wait_until(asked, what="the approval request")
    return str(run_id)


def cancel() -> Any:
    from workflows.runtime.types.ticks import TickCancelRun

    return TickCancelRun()


async def status(database: str, run_id: str) -> str:
    return str((await row(database, "SELECT status FROM llmc_runs WHERE run_id = $1", run_id))[0])


async def test_an_event_drained_while_its_run_is_let_go_is_delivered(database, calls, monkeypatch):
    """An event waits in the inbox as worker 1 lets its idle run go, and worker 1's drain
    of it runs right then: the event is not deleted undelivered; the run is cancelled."""
    async with (
        served(database, "one", calls, monkeypatch) as one,
        served(database, "two", calls, monkeypatch),
    ):
        runtime = one.durable.served
        run_id = await waiting_run(one)
        conn = await asyncpg.connect(database)  # sent through worker 2: waits in the inbox
        await conn.execute(
            "INSERT INTO llmc_inbox (run_id, body) VALUES ($1, '{\"cancel\": true}')", run_id
        )
        await conn.close()
        release = asyncio.ensure_future(runtime._release(run_id))
        await wait_until(lambda: run_id not in runtime.holding, what="the release")
        await runtime.drain(run_id)  # the NOTIFY of that event reaches worker 1 now
        await release
        await wait_until(lambda: status(database, run_id), what="the run's end")  # (any status row)
        await wait_until(
            lambda: _is(database, run_id, "cancelled"), what="the cancel to reach the run"
        )


async def _is(database: str, run_id: str, wanted: str) -> bool:
    return await status(database, run_id) == wanted


async def test_an_event_sent_as_its_run_is_let_go_wakes_it(database, calls, monkeypatch):
    """A cancel sent through worker 2 after worker 1 dropped its idle run from memory and
    before it let the run's row go: the run is not left ownerless and idle with the event
    waiting; it is taken up and cancelled."""
    async with (
        served(database, "one", calls, monkeypatch) as one,
        served(database, "two", calls, monkeypatch) as two,
    ):
        runtime = one.durable.served
        run_id = await waiting_run(one)
        journal = one.durable.journal
        fetch, letting_go, go_on = journal.fetch, asyncio.Event(), asyncio.Event()

        async def held(sql: str, *args: Any) -> Any:
            if "owner = NULL" in sql and not go_on.is_set():
                letting_go.set()
                await go_on.wait()  # worker 1 is about to let the run's row go
            return await fetch(sql, *args)

        journal.fetch = held  # type: ignore[method-assign]
        release = asyncio.ensure_future(runtime._release(run_id))
        await asyncio.wait_for(letting_go.wait(), 20)
        await two.durable.served.deliver(run_id, cancel())
        go_on.set()
        await release
        await wait_until(
            lambda: _is(database, run_id, "cancelled"), what="the cancel to reach the run"
        )
        pending = await row(database, "SELECT count(*) FROM llmc_inbox WHERE run_id = $1", run_id)
        assert pending[0] == 0


# ---------------------------------------------------------------- streams


async def test_live_readers_see_only_committed_events(database, calls, monkeypatch):
    """Events a worker appended but has not committed are shown to nobody: a crash could
    take them back, and the next worker numbers its events from the committed ones."""
    from llama_agents.client.protocol.serializable_events import EventEnvelopeWithMetadata

    from llm_compiler.durable.events import RunResumed

    async with served(database, "one", calls, monkeypatch) as one:
        run_id = await waiting_run(one)
        store = one.durable.store
        journal = one.durable.journal
        gate = asyncio.Event()
        write = journal.driver.write

        async def held(batch: Any, runs: Any, *rest: Any) -> Any:
            await gate.wait()
            return await write(batch, runs, *rest)

        journal.driver.write = held
        mark = EventEnvelopeWithMetadata.from_event(RunResumed(worker="x", after_sequence=0))
        seq = store._next[run_id]  # the number the mark gets
        await store.append_event(run_id, mark)
        journal.commit_soon()
        await asyncio.sleep(0.3)  # the commit is held: the event is not in the journal
        shown = [e.sequence for e in await store.query_events(run_id)]
        assert seq not in shown, "an uncommitted event was shown"
        gate.set()
        await wait_until(lambda: _shown(store, run_id, seq), what="the committed event")


async def _shown(store: Any, run_id: str, seq: int) -> bool:
    return seq in [e.sequence for e in await store.query_events(run_id)]


# ---------------------------------------------------------------- split brain


async def test_a_stale_owners_writes_are_refused(database):
    """Worker A holds a run; worker B takes it over (a new epoch): A's next write, an
    at-most-once start mark, is refused and its barrier raises; B's stands."""
    from llm_compiler.durable.backend import prepare
    from llm_compiler.durable.facts import Row
    from llm_compiler.durable.journal import Fenced, RunRecord

    a, b = prepare(database, worker="A"), prepare(database, worker="B")
    await a.journal.open()
    await b.journal.open()
    try:
        a.journal.hold("r", 1)
        a.journal.put_run(RunRecord("r", "h", "compiler", owner="A", epoch=1))
        a.journal.put("r", Row("start", "", "{}"))
        await a.journal.barrier("r")
        await b.journal.fetch("UPDATE llmc_runs SET owner = NULL, epoch = epoch + 1")
        await b.journal.fetch("INSERT INTO llmc_workers (worker) VALUES ('B')")  # B is live
        assert await b.take("r") is not None
        a.journal.put("r", Row("started", "0:1", "{}"))
        with pytest.raises(Fenced):
            await a.journal.barrier("r")
        b.journal.put("r", Row("started", "0:1", "{}"))
        await b.journal.barrier("r")
        found = await row(database, "SELECT owner, epoch FROM llmc_runs WHERE run_id = 'r'")
        assert tuple(found) == ("B", 3)
    finally:
        await a.journal.close()
        await b.journal.close()


def _compiler(runtime: Any, log: list[str], gate: asyncio.Event) -> Any:
    from llm_compiler import LLMCompilerWorkflow, policy
    from llm_compiler.testing import ScriptedLLM

    plan = '1. lookup("x")\n2. pay($1)\n3. join()<END_OF_PLAN>'

    @policy(side_effect="idempotent")
    async def lookup(name: str) -> str:
        """Look a value up."""
        log.append("lookup")
        if log.count("lookup") == 1:
            await gate.wait()  # the first call (worker A's) is held
        return f"value of {name}"

    @policy(side_effect="at_most_once")
    async def pay(value: str) -> str:
        """Pay for a value (a side effect that must not happen twice)."""
        log.append("pay")
        return "paid"

    finish = "Thought: done.\nAction: Finish(paid)"
    return LLMCompilerWorkflow(
        tools=[lookup, pay],
        llm=ScriptedLLM(lambda call: finish if "Finish(" in call.prompt else plan),
        runtime=runtime,
        timeout=60,
    )


async def test_a_worker_cut_from_its_lock_never_repeats_an_at_most_once_call(database):
    """Worker A's lock connection is terminated and its reconnect is slow: worker B takes
    A for dead, releases and resumes A's run, and calls its at-most-once tool. A, still
    running the run, starts no call while its lock is away; once back, it learns its run
    was taken and stops it. The tool ran once."""
    from llm_compiler.durable import durable_runtime

    log: list[str] = []
    gate = asyncio.Event()
    a_rt, b_rt = durable_runtime(database, worker="A"), durable_runtime(database, worker="B")
    wf_a, wf_b = _compiler(a_rt, log, gate), _compiler(b_rt, log, gate)
    await a_rt.launch()
    await b_rt.launch()
    a: Durable = a_rt.durable  # type: ignore[assignment]
    back = asyncio.Event()
    connect = a.liveness._connect  # type: ignore[attr-defined]

    async def slow_connect() -> Any:
        await back.wait()  # A's reconnect takes until the test allows it
        return await connect()

    run_a = asyncio.ensure_future(wf_a.run(user_msg="pay for x", run_id="run-1"))
    try:
        await wait_until(lambda: "lookup" in log, what="A's lookup")
        a.liveness._connect = slow_connect  # type: ignore[attr-defined]
        pid = a.liveness._conn.get_server_pid()  # type: ignore[attr-defined]
        killer = await asyncpg.connect(database)
        await killer.execute("SELECT pg_terminate_backend($1)", pid)
        await killer.close()

        async def released() -> bool:
            found = await row(database, "SELECT owner FROM llmc_runs WHERE run_id = 'run-1'")
            return found is not None and found[0] is None

        await wait_until(released, what="B to release A's run")
        assert str(await asyncio.wait_for(wf_b.run(user_msg="pay for x", run_id="run-1"), 30))
        assert log.count("pay") == 1
        gate.set()  # A's lookup returns: A would call pay next
        await asyncio.sleep(1.0)
        assert log.count("pay") == 1, log
        back.set()  # A holds its lock again, learns it was taken for dead
        with pytest.raises(BaseException):  # noqa: B017 - fenced or aborted: not an answer
            await asyncio.wait_for(run_a, 20)
        assert log.count("pay") == 1, log
    finally:
        gate.set()
        back.set()
        run_a.cancel()
        await asyncio.gather(run_a, return_exceptions=True)
        await b_rt.destroy()
        await a_rt.destroy()


async def test_a_call_marked_by_its_policy_and_by_itself_starts_once(tmp_path):
    """An ``at_most_once`` tool that also marks its own start (``at_most_once()``) is one
    call with one mark: it runs; a second start of that call would be refused."""
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.durable import at_most_once, durable_runtime
    from llm_compiler.testing import ScriptedLLM

    marked: list[bool] = []

    async def pay(value: str) -> str:
        """Pay (declares nothing: at most once)."""
        marked.append(await at_most_once())
        marked.append(await at_most_once())
        return "paid"

    runtime = durable_runtime(f"sqlite:///{tmp_path / 'runs.db'}")
    finish = "Thought: done.\nAction: Finish(paid)"
    wf = LLMCompilerWorkflow(
        tools=[pay],
        llm=ScriptedLLM(lambda c: finish if "Finish(" in c.prompt else '1. pay("x")\n2. join()'),
        runtime=runtime,
        timeout=30,
    )
    await runtime.launch()
    try:
        assert str(await wf.run(user_msg="pay", run_id="r1")) == "paid"
    finally:
        await runtime.destroy()
    assert marked == [True, True]


# ---------------------------------------------------------------- incarnations


async def test_a_run_claimed_back_is_not_ended_by_its_old_incarnation(database, calls, monkeypatch):
    """Worker 1 is taken for dead (its run released with a new epoch) and claims its run
    back while the old incarnation still unwinds in its process; the old incarnation's end
    comes while the new one is being resumed. It ends nothing of the new one: the run is
    held and runs here, and a cancel sent to it then reaches it."""
    async with served(database, "one", calls, monkeypatch) as one:
        runtime = one.durable.served
        journal = one.durable.journal
        run_id = await waiting_run(one)
        old = set(runtime._live)  # the old incarnation's end
        rows = journal.rows

        async def late(run: str) -> Any:
            if run == run_id and old:  # the old incarnation ends now, mid-resume
                await asyncio.wait(old)
                for _ in range(3):
                    await asyncio.sleep(0)  # (its done callbacks run)
            return await rows(run)

        journal.rows = late  # type: ignore[method-assign]
        conn = await asyncpg.connect(database)  # a peer took worker 1 for dead
        await conn.execute(
            "UPDATE llmc_runs SET owner = NULL, epoch = epoch + 1 WHERE run_id = $1", run_id
        )
        await conn.close()
        runtime.on_room()
        await wait_until(lambda: all(f.done() for f in old), what="the old incarnation's end")
        await wait_until(lambda: runtime._claiming is None, what="the claim")
        assert run_id in runtime.holding
        assert (await row(database, "SELECT owner FROM llmc_runs WHERE run_id = $1", run_id))[
            0
        ] == "one"
        await runtime.deliver(run_id, cancel())
        await wait_until(
            lambda: _is(database, run_id, "cancelled"), what="the cancel to reach the run"
        )


async def test_an_event_handed_to_an_owner_taken_for_dead_goes_to_the_next(
    database, calls, monkeypatch
):
    """A plan approval sent through worker 2 is handed to worker 1, which holds the run;
    worker 1 is taken for dead before it commits what the approval did. The approval is
    not lost with it: worker 2 claims the run, is handed the approval again, and the run
    ends with its answer; the inbox is empty after."""
    from .crash_app import ANSWER
    from .test_workers import approve

    async with (
        served(database, "one", calls, monkeypatch) as one,
        served(database, "two", calls, monkeypatch) as two,
    ):
        run_id = await waiting_run(one)
        handler = (
            await row(database, "SELECT handler_id FROM llmc_runs WHERE run_id = $1", run_id)
        )[0]
        request = next(
            e.event.model_dump(mode="json")
            for e in await one.durable.store.query_events(run_id)
            if e.event.type == "PlanApprovalRequest"
        )
        journal = one.durable.journal
        cut = asyncio.Event()

        write = journal.driver.write

        async def late(*args: Any) -> Any:  # worker 1 commits nothing until it is fenced
            await cut.wait()
            return await write(*args)

        journal.driver.write = late  # type: ignore[method-assign]
        runtime, handed = one.durable.served, asyncio.Event()
        drain = runtime.drain

        async def drained(run: str) -> None:
            await drain(run)
            handed.set()

        runtime.drain = drained  # type: ignore[method-assign]
        try:
            r = await two.post(f"/events/{handler}", json=approve(request))
            assert r.status_code == 200, r.text

            await asyncio.wait_for(handed.wait(), 20)  # worker 1 drained its inbox
            conn = await asyncpg.connect(database)  # worker 2 took worker 1 for dead
            await conn.execute(
                "UPDATE llmc_runs SET owner = NULL, epoch = epoch + 1 WHERE run_id = $1", run_id
            )
            await conn.close()
            two.durable.served.on_room()

            async def answered() -> bool:
                found = await row(
                    database, "SELECT status, result FROM llmc_runs WHERE run_id = $1", run_id
                )
                return found is not None and found[0] == "completed"

            await wait_until(answered, what="the run to end on worker 2")
            result = (
                await row(database, "SELECT result FROM llmc_runs WHERE run_id = $1", run_id)
            )[0]
            assert ANSWER in result
            pending = await row(
                database, "SELECT count(*) FROM llmc_inbox WHERE run_id = $1", run_id
            )
            assert pending[0] == 0
        finally:
            cut.set()


async def test_a_worker_taken_for_dead_takes_no_run_until_it_is_listed_again(database):
    """Worker A's lock connection is terminated and its reconnect is slow; B takes A for
    dead and releases A's run. A, not listed among the live workers, cannot claim the run
    back (were it to die then, nobody would release it); a run some unlisted worker holds
    is released by the next worker to start."""
    from llm_compiler.durable.backend import prepare
    from llm_compiler.durable.facts import Row
    from llm_compiler.durable.journal import RunRecord

    a, b = prepare(database, worker="A"), prepare(database, worker="B")
    await a.start()
    await b.start()
    back = asyncio.Event()
    connect = a.liveness._connect  # type: ignore[attr-defined]

    async def slow() -> Any:
        await back.wait()
        return await connect()

    a.liveness._connect = slow  # type: ignore[attr-defined]
    c = None
    try:
        a.journal.hold("r", 1)
        a.journal.put_run(RunRecord("r", "r", "compiler", owner="A", epoch=1))
        a.journal.put("r", Row("start", "", "{}"))
        await a.journal.barrier("r")
        killer = await asyncpg.connect(database)
        await killer.execute("SELECT pg_terminate_backend($1)", a.liveness._conn.get_server_pid())  # type: ignore[attr-defined]

        async def released() -> bool:
            found = await row(database, "SELECT owner FROM llmc_runs WHERE run_id = 'r'")
            return found[0] is None

        await wait_until(released, what="B to release A's run")
        assert await a.claim(None) == []
        assert await a.take("r") is None
        await killer.execute("UPDATE llmc_runs SET owner = 'gone', epoch = epoch + 1")
        await killer.close()
        c = prepare(database, worker="C")
        await c.start()
        assert await released()
    finally:
        back.set()
        for d in (a, b, c):
            if d is not None:
                await d.stop()


async def test_a_runs_end_and_its_last_event_are_committed_together(database, calls, monkeypatch):
    """The worker dies (nothing more is committed) as its run's answer is written: the
    run's row says completed only if its stream holds the answer too (a reader of a run
    that says completed is never left waiting for the end of its stream)."""
    async with served(database, "one", calls, monkeypatch) as one:
        store, journal = one.durable.store, one.durable.journal
        append = store.append_event
        died, answered = asyncio.Event(), asyncio.Event()

        async def dying(run_id: str, event: Any) -> None:
            if event.type == "StopEvent" and not died.is_set():
                # A run this quick may end before its start is answered: the start first.
                await asyncio.wait_for(answered.wait(), 30)
                died.set()
                assert journal._flusher is not None
                journal._flusher.cancel()  # kill -9: no commit from now on
            await append(run_id, event)

        store.append_event = dying  # type: ignore[method-assign]
        try:
            body = {"start_event": {"user_msg": "alpha, beta and gamma?"}}
            r = await one.post("/workflows/compiler/run-nowait", json=body)
            answered.set()
            assert r.status_code == 200, r.text
            handler = r.json()["handler_id"]
            await asyncio.wait_for(died.wait(), 30)
            await asyncio.sleep(0.3)
            found = await row(
                database,
                "SELECT r.status, (SELECT count(*) FROM llmc_events e WHERE e.run_id = r.run_id"
                " AND e.body LIKE '%\"StopEvent\"%') FROM llmc_runs r WHERE handler_id = $1",
                handler,
            )
            assert (found[0] == "completed") == (found[1] > 0), tuple(found)
        finally:  # the worker lives on (its pending commit goes through)
            if journal._flusher is None or journal._flusher.done():
                journal._flusher = asyncio.get_running_loop().create_task(journal._flush_forever())
