"""A result cache store in a SQLite file, shared by every process that opens it.

``LLMCompilerWorkflow(..., result_cache=SqliteCacheStore("runs.db"))`` keeps results with
a ``cache_ttl`` in the table ``llm_compiler_result_cache`` (key, output as JSON, the
seconds the call took, when it expires), so each worker of a server on that file serves
the others' results. Reads and writes run in a thread (never on the event loop), one
short transaction each; an expired row is not served and is deleted when read. An output
that JSON cannot hold is not stored (the call runs again next time).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from llm_compiler.engine.cache import Entry

TABLE = "llm_compiler_result_cache"
_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {TABLE} (key TEXT PRIMARY KEY, output TEXT NOT NULL, "
    "seconds REAL NOT NULL, expires_at REAL NOT NULL)"
)


class SqliteCacheStore:
    """A :class:`~llm_compiler.engine.cache.CacheStore` in the SQLite file at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            db = sqlite3.connect(self.path, timeout=30, check_same_thread=False)
            db.execute(_SCHEMA)
            db.commit()
            self._db = db
        return self._db

    def _get(self, key: str, now: float) -> Entry | None:
        with self._lock:
            db = self._connection()
            row = db.execute(
                f"SELECT output, seconds, expires_at FROM {TABLE} WHERE key = ?", (key,)
            ).fetchone()
            if row is not None and row[2] <= now:
                db.execute(f"DELETE FROM {TABLE} WHERE key = ? AND expires_at <= ?", (key, now))
                db.commit()
                return None
        return None if row is None else Entry(json.loads(row[0]), row[1], row[2])

    def _put(self, key: str, entry: Entry) -> None:
        try:
            text = json.dumps(entry.output, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError):
            return
        with self._lock:
            db = self._connection()
            db.execute(
                f"INSERT OR REPLACE INTO {TABLE} (key, output, seconds, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (key, text, entry.seconds, entry.expires_at),
            )
            db.commit()

    async def get(self, key: str, now: float) -> Entry | None:
        """The entry under `key`, unless it expired by `now`."""
        return await asyncio.to_thread(self._get, key, now)

    async def put(self, key: str, entry: Entry) -> None:
        """Store `entry` under `key` (replacing any)."""
        await asyncio.to_thread(self._put, key, entry)

    def close(self) -> None:
        """Close the connection (it opens again on next use)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> SqliteCacheStore:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
