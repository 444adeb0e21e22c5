"""``llm-compiler store``: bring a store's schema up to date, delete old finished runs."""

from __future__ import annotations

import re

from llm_compiler.durable.backend import prune
from llm_compiler.durable.config import DurableConfig
from llm_compiler.durable.journal import Journal
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
    before and after."""
    from llm_compiler.durable import schema

    journal = Journal(DurableConfig.build(store, worker="store-admin"))
    await journal.driver.open()
    try:
        before = await journal.driver.migrate()
    finally:
        await journal.driver.close()
    return before, schema.VERSION


async def prune_store(store: str, older_than: float) -> int:
    """Delete the runs of `store` that finished more than `older_than` seconds ago; how
    many went."""
    journal = Journal(DurableConfig.build(store, worker="store-admin"))
    await journal.open()
    try:
        return await prune(journal, older_than)
    finally:
        await journal.close()
