"""The journal's committing task outlives any fault: a connection the server just closed, or
rows the database refuses. Faults are injected at the exact point (no load, no timing)."""

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
