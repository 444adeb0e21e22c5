"""``llm-compiler store``: bring a store's schema up to date, delete old finished runs."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from llm_compiler.durable.backend import check_reachable, prune
from llm_compiler.durable.config import DurableConfig
from llm_compiler.durable.journal import Journal
from llm_compiler.durable.spec import StoreSpec
from llm_compiler.errors import ConfigurationError

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_age(text: str) -> float:
    """Seconds of an age such as ``90``, ``30m``, ``12h`` or ``7d``.

    Raises:
        ConfigurationError: Not a positive number with an optional unit (s, m, h, d).
    """
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    seconds = float(found[1]) * _UNITS[found[2] or "s"] if found else 0.0
    if seconds <= 0:
        raise ConfigurationError(f"Expected an age such as 90s, 30m, 12h or 7d, got {text!r}.")
    return seconds


async def migrate(store: str) -> tuple[int, int]:
    """Bring `store`'s tables to the current schema (once, under a lock): the versions
    before and after.

    Raises:
        ConfigurationError: The store cannot be reached or refuses (one line).
    """
    from llm_compiler.durable import schema

    journal = await _journal(store)
    with _in_one_line(journal.config.spec):
        await journal.driver.open()
        try:
            before = await journal.driver.migrate()
        finally:
            await journal.driver.close()
    return before, schema.VERSION


async def prune_store(store: str, older_than: float) -> int:
    """Delete the runs of `store` that finished more than `older_than` seconds ago; how
    many went.

    Raises:
        ConfigurationError: The store cannot be reached or refuses (one line).
    """
    journal = await _journal(store)
    with _in_one_line(journal.config.spec):
        await journal.open()
        try:
            return await prune(journal, older_than)
        finally:
            await journal.close()


async def _journal(store: str) -> Journal:
    """A journal on `store`, whose database was reached once (a wrong password, a host
    that does not answer: a one-line error now)."""
    config = DurableConfig.build(store, worker="store-admin")
    if config.spec.kind == "postgres":
        await check_reachable(config.spec)
    return Journal(config)


@contextmanager
def _in_one_line(spec: StoreSpec) -> Iterator[None]:
    """The database's own error, as a one-line configuration error naming the store."""
    errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError, TimeoutError)
    if spec.kind == "postgres":
        import asyncpg

        errors += (asyncpg.PostgresError, asyncpg.InterfaceError)
    try:
        yield
    except errors as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigurationError(f"The store {spec.shown} refused: {detail}") from e
