"""Worker liveness on Postgres: a dead peer's runs are released once, even after a refused
connect; a worker cut off by a database restart takes its lock back and goes on."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

asyncpg = pytest.importorskip("asyncpg")

from llm_compiler.durable import workers  # noqa: E402
from llm_compiler.durable.config import DurableConfig  # noqa: E402
from llm_compiler.durable.workers import PostgresLiveness  # noqa: E402

pytestmark = pytest.mark.timeout(60)


async def peer(database: str, name: str) -> object:
    """A worker `name` holding its lock (and announced) on a connection of its own."""
    conn = await asyncpg.connect(database)
    await conn.execute(
        "CREATE TABLE IF NOT EXISTS llmc_workers (worker TEXT PRIMARY KEY, host TEXT,"
        " pid INT, started_at TIMESTAMPTZ DEFAULT now())"
    )
    await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", workers._key(name))
    await conn.execute("INSERT INTO llmc_workers (worker) VALUES ($1)", name)
    return conn


async def test_a_refused_connect_does_not_leave_a_dead_peer_unwatched(database, monkeypatch):
    monkeypatch.setattr(workers, "REWATCH_GRACE", 0.2)
    b = await peer(database, "b")
    released: list[str] = []
    done = asyncio.Event()

    async def release(worker: str) -> None:
        released.append(worker)
        done.set()

    a = PostgresLiveness(DurableConfig.build(database, worker="a"), release, pytest.fail)
    real = a._connect
    refusals = []

    async def connect() -> object:
        if not refusals:  # the first watcher connect is refused (e.g. max_connections)
            refusals.append(1)
            raise asyncpg.TooManyConnectionsError("sorry, too many clients already")
        return await real()

    await a._hold()
    monkeypatch.setattr(a, "_connect", connect)
    a._watch("b")
    await asyncio.sleep(0.5)  # refused, then watched again
    assert refusals and "b" in a._watchers
    b.terminate()  # the peer dies
    await asyncio.wait_for(done.wait(), 10)
    assert released == ["b"]
    await a.stop()
    assert not a._watchers


async def test_a_worker_takes_its_lock_back_after_its_connection_drops(database, monkeypatch):
    fenced: list[str] = []
    a = PostgresLiveness(DurableConfig.build(database, worker="a2"), lambda w: None, fenced.append)  # type: ignore[arg-type,return-value]
    await a.start()
    killer = await asyncpg.connect(database)
    await killer.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
        " AND granted AND pid <> pg_backend_pid()"
    )
    for _ in range(100):
        await asyncio.sleep(0.05)
        if not a.degraded and a._conn is not None and not a._conn.is_closed():
            break
    assert not a.degraded and not fenced
    held = await killer.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
    )
    assert held == 1  # its own lock again
    await killer.close()
    await a.stop()


async def test_a_peer_waits_its_grace_after_the_database_is_back_not_after_the_loss(
    database, monkeypatch
):
    """An outage longer than the grace: the watcher that reaches the database first waits
    the grace from then, so the live peer takes its lock back first and is not taken for
    dead (released and fenced) while it reconnects."""
    monkeypatch.setattr(workers, "REWATCH_GRACE", 1.5)
    released: list[str] = []
    fenced: list[str] = []

    async def release(worker: str) -> None:
        released.append(worker)

    a = PostgresLiveness(DurableConfig.build(database, worker="wa"), release, fenced.append)
    config_b = replace(DurableConfig.build(database, worker="wb"), backoff=(0.05, 0.3))
    b = PostgresLiveness(config_b, release, fenced.append)
    monkeypatch.setattr(b, "_watch", lambda *args, **kw: None)  # only a watches
    await a.start()
    await b.start()
    killer = await asyncpg.connect(database)
    waiting = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    for _ in range(200):  # a's watcher blocks on b's lock
        if await killer.fetch(waiting):
            break
        await asyncio.sleep(0.05)
    watcher = [r["pid"] for r in await killer.fetch(waiting)]
    assert len(watcher) == 1
    down = True  # the outage: neither reaches the database ...
    real_a, real_b = a._connect, b._connect

    async def connect_a() -> object:
        nonlocal down
        down = False  # ... until a's watcher tries again: the database is back right then
        return await real_a()

    async def connect_b() -> object:
        if down:
            raise OSError("Connect call failed")
        return await real_b()

    monkeypatch.setattr(a, "_connect", connect_a)
    monkeypatch.setattr(b, "_connect", connect_b)
    await killer.execute(
        "SELECT pg_terminate_backend(pid) FROM unnest($1::int[]) AS pid",
        [*watcher, b._conn.get_server_pid()],
    )
    for _ in range(200):  # b holds its lock again and a's watcher waits on it again
        await asyncio.sleep(0.05)
        if not b.degraded and len(await killer.fetch(waiting)) == 1 or fenced:
            break
    assert not fenced and not released
    assert not b.degraded and len(await killer.fetch(waiting)) == 1
    await killer.close()
    await b.stop()
    await a.stop()
