"""The result cache every worker of a durable store shares.

``llm-compiler serve --store postgresql://...`` (or ``sqlite:///...``) gives each served
compiler :func:`shared_cache` of its store, unless the compiler was made with a store of
its own or ``--no-result-cache`` turns caching off. In your own process::

    from llm_compiler.durable.result_cache import PostgresCacheStore

    store = PostgresCacheStore("postgresql://user@host/db")
    wf = LLMCompilerWorkflow(tools=..., llm=..., result_cache=store)
    ...
    await store.close()

The table ``llm_compiler_result_cache (key text primary key, output jsonb, seconds, expires_at)``
is made by the store's schema migration (``llm-compiler store migrate``, or a worker's
start; a store given a URL runs it when it connects). A read or a write is one statement
on asyncpg, on the event loop without blocking it; an expired row is never served, is
deleted when read, and all expired rows go with the store's pruning (``serve --retain``,
``llm-compiler store prune``). An output that JSON cannot hold (or a string with a NUL,
which jsonb refuses) is not stored: the next call runs the tool again. Objects come back
with jsonb's key order.
"""

from __future__ import annotations

import asyncio
import json
import logging

from llm_compiler.durable.journal import Driver, PostgresDriver
from llm_compiler.durable.spec import StoreSpec
from llm_compiler.engine.cache import CacheStore, Entry
from llm_compiler.engine.cache_sqlite import TABLE, SqliteCacheStore

logger = logging.getLogger(__name__)

_GET = f"SELECT output::text, seconds, expires_at FROM {TABLE} WHERE key = ?"
_DROP = f"DELETE FROM {TABLE} WHERE key = ? AND expires_at <= ?"
_PUT = (
    f"INSERT INTO {TABLE} (key, output, seconds, expires_at) VALUES (?, ?::jsonb, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET output = excluded.output, seconds = excluded.seconds,"
    " expires_at = excluded.expires_at"
)
#: Deletes every expired entry (`?`: now).
PRUNE = f"DELETE FROM {TABLE} WHERE expires_at <= ?"


class PostgresCacheStore:
    """A :class:`~llm_compiler.engine.cache.CacheStore` in a Postgres database.

    Args:
        url: The database (``postgresql://...``); the store opens a small pool of its own
            on first use (and brings the schema up to date). :meth:`close` closes it.
        driver: Instead of `url`, the connections of a durable store's journal (shared,
            not closed by this store).
    """

    def __init__(self, url: str | None = None, *, driver: Driver | None = None) -> None:
        if (url is None) == (driver is None):
            raise ValueError("Give PostgresCacheStore a URL or a driver, not both or none.")
        self.url = url
        self._driver = driver
        self._opening: asyncio.Lock | None = None

    async def _ready(self) -> Driver:
        if self._driver is not None:
            return self._driver
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._driver is None:
                assert self.url is not None
                driver = PostgresDriver(self.url)
                await driver.open()
                try:
                    await driver.migrate()
                except BaseException:
                    await driver.close()
                    raise
                self._driver = driver
        return self._driver

    async def get(self, key: str, now: float) -> Entry | None:
        """The entry under `key`, unless it expired by `now` (then it is deleted)."""
        driver = await self._ready()
        rows = await driver.fetch(_GET, key)
        if not rows:
            return None
        output, seconds, expires_at = rows[0]
        if expires_at <= now:
            await driver.fetch(_DROP, key, now)
            return None
        return Entry(json.loads(output), float(seconds), float(expires_at))

    async def put(self, key: str, entry: Entry) -> None:
        """Store `entry` under `key` (replacing any); an output with no JSON form is not."""
        try:
            text = json.dumps(entry.output, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return
        if "\\u0000" in text:
            return  # jsonb holds no NUL character
        driver = await self._ready()
        await driver.fetch(_PUT, key, text, entry.seconds, entry.expires_at)

    async def close(self) -> None:
        """Close the pool this store opened (a shared driver stays open)."""
        if self.url is not None and self._driver is not None:
            driver, self._driver = self._driver, None
            await driver.close()


def shared_cache(spec: StoreSpec, driver: Driver | None = None) -> CacheStore | None:
    """The result cache of a durable store `spec` (None for the memory store): on
    Postgres over `driver` (the journal's connections) if given, on SQLite its file."""
    if spec.kind == "postgres":
        return PostgresCacheStore(spec.url) if driver is None else PostgresCacheStore(driver=driver)
    if spec.kind == "sqlite":
        return SqliteCacheStore(spec.url.removeprefix("sqlite:///"))
    return None
