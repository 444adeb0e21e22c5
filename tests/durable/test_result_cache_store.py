"""The result cache a durable store's workers share: on Postgres (the table the schema
migration makes), served by ``llm-compiler serve --store`` to every compiler, pruned with
the store's retention."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.cli import main, share_result_cache
from llm_compiler.durable.result_cache import PostgresCacheStore, shared_cache
from llm_compiler.durable.schema import VERSION
from llm_compiler.durable.spec import parse_store
from llm_compiler.engine.cache import PROCESS_CACHE, Entry, MemoryCache
from llm_compiler.engine.cache_sqlite import SqliteCacheStore
from llm_compiler.events import TaskResult
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools import tool_map
from tests.durable.conftest import Calls, Worker

pytestmark = pytest.mark.timeout(120)

FINISH = "Thought: done.\nAction: Finish(ok)"
PLAN = '1. price(item="tea")\n2. price(item="salt")\n3. join()<END_OF_PLAN>'


class Shop:
    """A pure tool `price` that counts its calls and fails on the items in `failing`."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.failing: set[str] = set()

    def tool(self) -> Any:
        async def price(item: str) -> dict[str, Any]:
            """The price of an item."""
            self.calls.append(item)
            if item in self.failing:
                raise ValueError(f"no price for {item}")
            return {"item": item, "cents": len(item) * 100, "tags": ["a", "b"]}

        return tool_map([price])["price"]


async def ask(tool: Any, store: Any, ttl: float = 600) -> tuple[Any, list[TaskResult]]:
    """One run of PLAN on a new workflow (a worker of the compiler ``shop``) keeping
    results in `store`."""
    wf = LLMCompilerWorkflow(
        tools=[tool],
        llm=ScriptedLLM([PLAN, FINISH]),
        tool_policies={"price": ToolPolicy(side_effect="pure", cache_ttl=ttl)},
        result_cache=store,
        cache_namespace="shop",
    )
    handler = wf.run(user_msg="What do tea and salt cost?")
    results = [ev async for ev in handler.stream_events() if isinstance(ev, TaskResult)]
    return await handler, results


async def rows(database: str) -> list[tuple[Any, ...]]:
    conn = await asyncpg.connect(database)
    try:
        found = await conn.fetch(
            "SELECT key, output, expires_at FROM llm_compiler_result_cache ORDER BY expires_at"
        )
        return [tuple(r) for r in found]
    finally:
        await conn.close()


async def test_two_workers_on_one_database_share_a_pure_result_within_its_ttl(database):
    shop = Shop()
    tool = shop.tool()
    first, second = PostgresCacheStore(database), PostgresCacheStore(database)
    try:
        out, results = await ask(tool, first)
        assert sorted(shop.calls) == ["salt", "tea"] and not any(r.cached for r in results)
        out, results = await ask(tool, second)  # another worker: served from the table
        assert sorted(shop.calls) == ["salt", "tea"]
        assert all(r.cached and r.attempts == 0 for r in results)
        assert {r.output["item"] for r in results} == {"tea", "salt"}
        assert results[0].output["tags"] == ["a", "b"]
        assert out.summary.cached_calls == 2
        assert all(t.cached for t in out.summary.tasks)
    finally:
        await first.close()
        await second.close()
    assert len(await rows(database)) == 2


async def test_an_error_is_never_stored_and_an_expired_entry_is_not_served(database):
    shop = Shop()
    tool = shop.tool()
    shop.failing = {"salt"}
    store, other = PostgresCacheStore(database), PostgresCacheStore(database)
    try:
        _, results = await ask(tool, store)
        assert [r.is_error for r in sorted(results, key=lambda r: r.task_id)] == [False, True]
        stored = await rows(database)
        assert len(stored) == 1 and json.loads(stored[0][1])["item"] == "tea"
        _, results = await ask(tool, other)
        assert sorted(shop.calls) == ["salt", "salt", "tea"]  # the failure was called again
        # expiry, on the store itself: not served once `now` reaches it, and deleted
        await store.put("k", Entry({"x": [1, 2.5, None]}, 0.5, 100.0))
        assert await store.get("k", 99.0) == Entry({"x": [1, 2.5, None]}, 0.5, 100.0)
        assert await store.get("k", 100.0) is None
        assert await store.get("k", 1.0) is None  # gone from the table
        await store.put("nul", Entry("a\0b", 0.1, 1e12))  # jsonb holds no NUL: not stored
        await store.put("set", Entry({1, 2}, 0.1, 1e12))  # no JSON form: not stored
        assert await store.get("nul", 1.0) is None and await store.get("set", 1.0) is None
    finally:
        await store.close()
        await other.close()


async def test_a_ttl_that_ran_out_calls_the_tool_again(database):
    shop = Shop()
    tool = shop.tool()
    store = PostgresCacheStore(database)
    try:
        await ask(tool, store, ttl=0.05)
        time.sleep(0.1)  # noqa: ASYNC251 - the TTL must run out on the wall clock
        _, results = await ask(tool, store, ttl=0.05)
        assert len(shop.calls) == 4 and not any(r.cached for r in results)
    finally:
        await store.close()


async def test_a_database_that_is_away_is_a_miss_not_a_failure():
    shop = Shop()
    store = PostgresCacheStore("postgresql://nobody@127.0.0.1:1/none")
    out, results = await ask(shop.tool(), store)
    assert not any(r.is_error or r.cached for r in results) and len(shop.calls) == 2
    assert str(out) == "ok"


def test_migrate_makes_the_table_and_prune_deletes_expired_entries(database, capsys):
    assert main(["store", "migrate", "--store", database]) == 0
    assert f"Schema version {VERSION} (was none)" in capsys.readouterr().out

    async def fill() -> str:
        conn = await asyncpg.connect(database)
        try:
            kind = await conn.fetchval(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_name = 'llm_compiler_result_cache' AND column_name = 'output'"
            )
            for key, expires in (("old", time.time() - 1), ("live", time.time() + 600)):
                await conn.execute(
                    "INSERT INTO llm_compiler_result_cache VALUES ($1, '{}'::jsonb, 0.1, $2)",
                    key,
                    expires,
                )
        finally:
            await conn.close()
        return str(kind)

    assert asyncio.run(fill()) == "jsonb"
    assert main(["store", "prune", "--store", database, "--older-than", "1h"]) == 0
    assert [r[0] for r in asyncio.run(rows(database))] == ["live"]


def test_serve_gives_each_compiler_its_stores_shared_cache(tmp_path: Path):
    shop = Shop()
    plain = LLMCompilerWorkflow(tools=[shop.tool()], llm=ScriptedLLM([]))
    own = MemoryCache()
    mine = LLMCompilerWorkflow(tools=[shop.tool()], llm=ScriptedLLM([]), result_cache=own)
    assert plain.result_cache is PROCESS_CACHE
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["store", "migrate", "--store", url]) == 0  # the table, by the migration
    store = shared_cache(parse_store(url))
    assert isinstance(store, SqliteCacheStore)
    share_result_cache({"a": plain, "b": mine}, store)
    assert plain.result_cache is store and mine.result_cache is own
    assert plain.cache_owner == "namespace:served:a" != mine.cache_owner
    tool = shop.tool()
    for _ in range(2):  # the migrated table serves the second run
        _, results = asyncio.run(ask(tool, store))
    assert sorted(shop.calls) == ["salt", "tea"] and all(r.cached for r in results)
    store.close()
    assert isinstance(shared_cache(parse_store("postgresql://u@h/db")), PostgresCacheStore)
    assert shared_cache(parse_store("memory")) is None


def test_served_workers_on_postgres_share_results_and_show_them(
    database: str, calls: Calls, workers: list[Worker], tmp_path: Path
):
    """Two ``serve --store postgresql://`` workers: a pure call with a TTL made by one is
    served to the other (its summary and event stream say so); the plan cache saves the
    planner call of a question asked again."""
    policies = tmp_path / "policies.json"
    policies.write_text(json.dumps({"fetch": {"side_effect": "pure", "cache_ttl": 600}}))
    extra = ("--tool-policies", str(policies), "--plan-cache")
    workers += [Worker(database, calls, *extra, wait=False) for _ in range(2)]
    for worker in workers:  # started together
        worker.ready()
    summaries = []
    for worker in (workers[0], workers[1], workers[1]):
        handler_id = worker.start_run()
        handler = worker.wait_done(handler_id)
        assert handler["status"] == "completed", handler
        summaries.append(handler["result"]["value"]["result"]["summary"])
        events = worker.events(handler_id)
    fetched = [what for _, kind, what in calls.lines() if kind == "tool" and "fetch" in what]
    assert sorted(fetched) == ["fetch:alpha", "fetch:beta"]  # once, for three runs
    assert summaries[0]["cached_calls"] == 0 and summaries[1]["cached_calls"] == 2
    assert summaries[1]["planner_calls_saved"] == 0 and summaries[2]["planner_calls_saved"] == 1
    cached = [e["value"]["tool_name"] for e in events if e["type"] == "TaskResult"]
    assert sorted(
        e["value"]["tool_name"]
        for e in events
        if e["type"] == "TaskResult" and e["value"].get("cached")
    ) == ["fetch", "fetch"], cached
