"""The tables of durable runs, created and upgraded once, under one lock.

:func:`migrate` brings a database to :data:`VERSION`: on Postgres in one transaction
holding a transaction advisory lock, so any number of workers starting together on an
empty database create the tables once (the others wait, then find them made); on SQLite
in one ``BEGIN IMMEDIATE`` transaction. ``llmc_schema`` holds the version reached; a
database already there costs one query. ``llm-compiler store migrate`` runs it on its
own (the first worker to start runs it too).

=============  ====================================================================
table          rows
=============  ====================================================================
llmc_runs      one per run: handler, workflow, status, owner, ownership epoch, start,
               result or error, times
llmc_facts     the run's facts and records (:mod:`.facts`), ``start`` and ``started``
llmc_events    the run's event stream (committed events only, numbered gap-free)
llmc_inbox     events and cancels sent to a run, until the commit after their effect
               (``taken``: the epoch of the owner they were last handed to)
llmc_workers   the live workers (Postgres)
llmc_schema    the schema version
llm_compiler_  results of cacheable tool calls every worker serves (output as jsonb on
result_cache   Postgres, JSON text on SQLite), until ``expires_at``
=============  ====================================================================
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from llm_compiler.errors import ConfigurationError

#: The schema version this code writes.
VERSION = 3
#: The transaction advisory lock serializing schema changes (and the workers table).
DDL_LOCK = 0x6C6C6D63

_RUNS = (
    "CREATE TABLE IF NOT EXISTS llmc_runs (run_id TEXT PRIMARY KEY, handler_id TEXT UNIQUE,"
    " workflow TEXT NOT NULL, status TEXT NOT NULL, owner TEXT, start TEXT, result TEXT,"
    " error TEXT, started_at DOUBLE PRECISION, updated_at DOUBLE PRECISION,"
    " completed_at DOUBLE PRECISION, idle_since DOUBLE PRECISION,"
    " epoch BIGINT NOT NULL DEFAULT 0)"
)
_COMMON = [
    "CREATE TABLE IF NOT EXISTS llmc_facts (run_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " key TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, kind, key))",
    "CREATE TABLE IF NOT EXISTS llmc_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE INDEX IF NOT EXISTS llmc_runs_owner ON llmc_runs (owner, status)",
    "CREATE INDEX IF NOT EXISTS llmc_runs_newest ON llmc_runs (workflow, started_at, handler_id)",
    "CREATE INDEX IF NOT EXISTS llmc_runs_done ON llmc_runs (completed_at)",
    "CREATE INDEX IF NOT EXISTS llmc_inbox_run ON llmc_inbox (run_id, id)",
    "CREATE TABLE IF NOT EXISTS llmc_schema (version INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS llm_compiler_result_cache_expiry"
    " ON llm_compiler_result_cache (expires_at)",
]
#: The shared result cache (:mod:`llm_compiler.durable.result_cache`), output as `kind`.
_CACHE = (
    "CREATE TABLE IF NOT EXISTS llm_compiler_result_cache (key TEXT PRIMARY KEY,"
    " output {} NOT NULL, seconds DOUBLE PRECISION NOT NULL,"
    " expires_at DOUBLE PRECISION NOT NULL)"
)
_POSTGRES = [
    _RUNS,
    "ALTER TABLE llmc_runs ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0",
    "CREATE TABLE IF NOT EXISTS llmc_inbox (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL,"
    " body TEXT NOT NULL)",
    "ALTER TABLE llmc_inbox ADD COLUMN IF NOT EXISTS taken BIGINT",
    "CREATE TABLE IF NOT EXISTS llmc_workers (worker TEXT PRIMARY KEY, host TEXT, pid INT,"
    " started_at TIMESTAMPTZ DEFAULT now())",
    _CACHE.format("JSONB"),
    *_COMMON,
]
_SQLITE = [
    _RUNS,
    "CREATE TABLE IF NOT EXISTS llmc_inbox (id INTEGER PRIMARY KEY, run_id TEXT NOT NULL,"
    " body TEXT NOT NULL, taken BIGINT)",
    _CACHE.format("TEXT"),
    *_COMMON,
]

#: Columns added since version 1 (table, column, type): SQLite adds them one by one.
_SQLITE_COLUMNS = [
    ("llmc_runs", "epoch", "BIGINT NOT NULL DEFAULT 0"),
    ("llmc_inbox", "taken", "BIGINT"),
]

Execute = Callable[[str], Awaitable[list[tuple[Any, ...]]]]


def statements(kind: str) -> list[str]:
    """The DDL bringing a `kind` (``postgres``/``sqlite``) database to :data:`VERSION`,
    each statement safe to run again."""
    return list(_POSTGRES if kind == "postgres" else _SQLITE)


async def current(execute: Execute) -> int:
    """The schema version a database holds (0: none yet, or from before versions)."""
    try:
        rows = await execute("SELECT max(version) FROM llmc_schema")
    except Exception as e:  # no table yet: the caller migrates
        if "llmc_schema" not in str(e):
            raise
        return 0
    return int(rows[0][0]) if rows and rows[0][0] is not None else 0


async def upgrade(kind: str, execute: Execute) -> int:
    """Run inside the caller's locked transaction: the DDL, then the version row.
    Returns the version the database held before.

    Raises:
        ConfigurationError: The database was made by a newer llm-compiler.
    """
    if kind == "postgres":
        await execute(f"SELECT pg_advisory_xact_lock({DDL_LOCK})")
    for ddl in statements(kind):
        await execute(ddl)
    if kind == "sqlite":  # older tables lack columns (no ADD COLUMN IF NOT EXISTS)
        for table, column, ddl in _SQLITE_COLUMNS:
            columns = {str(row[1]) for row in await execute(f"PRAGMA table_info({table})")}
            if column not in columns:
                await execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl}")
    before = await current(execute)
    if before > VERSION:
        raise ConfigurationError(
            f"The store holds schema version {before}, newer than this llm-compiler's "
            f"({VERSION}): upgrade llm-compiler."
        )
    if before < VERSION:
        await execute("DELETE FROM llmc_schema")
        await execute(f"INSERT INTO llmc_schema (version) VALUES ({VERSION})")
    return before


async def migrate_postgres(conn: Any) -> int:
    """:func:`upgrade` on an asyncpg connection, in one transaction, unless the database is
    there already; the version it held before."""

    async def execute(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in await conn.fetch(sql)]

    if await current(execute) == VERSION:
        return VERSION
    async with conn.transaction():
        return await upgrade("postgres", execute)
