"""The journal's committing task outlives any fault (a connection the server just closed,
rows the database refuses; injected at the exact point, no load, no timing), and what a
run's barrier waits for."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import AsyncIterator
from typing import Any

import pytest

from llm_compiler.durable.config import DurableConfig
from llm_compiler.durable.facts import Row
from llm_compiler.durable.journal import Journal, PostgresDriver


def server_fatal() -> bytes:
    """The ``ErrorResponse`` a backend sends as ``pg_ctl restart -m fast`` terminates it."""
    fields = b"SFATAL\0VFATAL\0C57P01\0Mterminating connection due to administrator command\0\0"
    return b"E" + struct.pack("!i", 4 + len(fields)) + fields


@pytest.fixture
async def journal(database: str) -> AsyncIterator[Journal]:
    j = Journal(DurableConfig.build(database, worker="test"))
    await j.open()
    yield j
    await asyncio.wait_for(j.close(), 20)  # (a dead committing task never commits)


async def test_a_fatal_that_reaches_the_idle_writer_before_its_close_is_retried(journal):
    """A restart's FATAL arrives on the idle writer connection; its close is not seen yet
    (on a loaded machine the backend exits a while after sending it). The next commit on
    that connection fails with asyncpg's InternalClientError ("another operation is in
    progress"): it is a lost connection, retried on a fresh one, and the committing task
    lives on."""
    journal.put("r1", Row("task", "1", "{}"))
    await journal.barrier("r1")
    assert isinstance(journal.driver, PostgresDriver)
    writer: Any = journal.driver._writer
    writer._protocol.data_received(server_fatal())
    assert not writer.is_closed()  # the state the restart leaves for a moment
    journal.put("r1", Row("task", "2", "{}"))
    await asyncio.wait_for(journal.barrier("r1"), 20)
    journal.put("r1", Row("task", "3", "{}"))  # later rows are committed too
    await asyncio.wait_for(journal.barrier("r1"), 20)
    assert sorted(key for kind, key, _ in await journal.rows("r1")) == ["1", "2", "3"]
    assert not journal.degraded


async def test_rows_the_database_refuses_fail_their_run_only(journal):
    """A refused row (here a NUL character, which Postgres text cannot hold) fails its own
    run's barrier with the database's error; other runs' rows of the same commit stand,
    and the journal goes on committing."""
    journal.put("bad", Row("head", "", "a\0b"))
    journal.put("good", Row("task", "1", "{}"))
    with pytest.raises(Exception, match="0x00"):
        await asyncio.wait_for(journal.barrier("bad"), 20)
    await asyncio.wait_for(journal.barrier("good"), 20)
    assert [key for _, key, _ in await journal.rows("good")] == ["1"]
    assert await journal.rows("bad") == []
    journal.put("good", Row("task", "2", "{}"))
    await asyncio.wait_for(journal.barrier("good"), 20)
    assert len(await journal.rows("good")) == 2
    with pytest.raises(Exception, match="0x00"):  # the bad run stays failed
        await journal.barrier("bad")


async def test_a_barrier_waits_for_the_runs_facts_not_its_stream_events(tmp_path):
    """Nothing acts on stream events, so a step's barrier does not wait for their commit
    (else each parallel task waited for a commit of the events before it); facts it does."""
    journal = Journal(DurableConfig.build(f"sqlite:///{tmp_path / 'j.db'}"))
    await journal.open()
    gate = asyncio.Event()
    write = journal.driver.write

    async def held(batch: Any, runs: set[str], epochs: Any) -> Any:
        await gate.wait()
        return await write(batch, runs, epochs)

    journal.driver.write = held  # type: ignore[method-assign]
    try:
        journal.put_event("r", 0, 0.0, "{}")
        await asyncio.wait_for(journal.barrier("r"), 5)  # the event's commit is held
        journal.put("r", Row("task", "1", "{}"))
        barrier = asyncio.ensure_future(journal.barrier("r"))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not barrier.done()  # a fact is waited for
        gate.set()
        await asyncio.wait_for(barrier, 5)
        await journal.commit()
        assert [seq for seq, _, _ in await journal.events("r")] == [0]
        assert [key for _, key, _ in await journal.rows("r")] == ["1"]
    finally:
        gate.set()
        await journal.close()


async def test_a_runs_failure_lasts_until_it_is_taken_again(journal):
    """A refused row fails every later barrier of its run (its facts are not all recorded),
    until the run is taken up again (resumed from what stands) or let go."""
    journal.put("bad", Row("head", "", "a\0b"))
    with pytest.raises(Exception, match="0x00"):
        await asyncio.wait_for(journal.barrier("bad"), 20)
    journal.put("bad", Row("task", "1", "{}"))
    with pytest.raises(Exception, match="0x00"):
        await asyncio.wait_for(journal.barrier("bad"), 20)
    journal.hold("bad", 0)  # resumed: it acts on what stands
    journal.put("bad", Row("task", "2", "{}"))
    await asyncio.wait_for(journal.barrier("bad"), 20)
    assert sorted(key for kind, key, _ in await journal.rows("bad")) == ["1", "2"]
