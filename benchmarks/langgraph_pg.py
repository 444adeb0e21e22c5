"""LangGraph's checkpointers on the fan-out of ``benchmarks/durable.py``, for comparison.

``.venv-langgraph/bin/python -m benchmarks.langgraph_pg --dsn [LABEL=]postgresql://... [--runs N]``
(``make bench-langgraph-venv`` makes that venv; this script imports neither llm_compiler nor
llama-index, only the standard-library ``benchmarks.costs``; ``python -m benchmarks.durable``
runs it when the venv exists).

The graph: a ``plan`` node, N parallel instant ``fetch`` nodes (``Send``, each returning a
string), a ``join`` node, END: the shape of ``durable.make(tasks)``'s plan. Per variant (no
checkpointer, ``InMemorySaver``, ``AsyncPostgresSaver`` per ``--dsn`` and durability mode)
and N in (1, 9): the median wall time of ``await graph.ainvoke(...)`` over ``--runs`` runs,
each on a fresh thread id, after two warm-up runs. The variants take turns round by round,
in rotating order, so drift on a shared machine hits all alike. Derived by
``benchmarks.costs.summarize``, as for the durable stores: per task = (L9 - L1) / 8, per
run = L1 - per task, extras and the 1-task ratio over the graph without a checkpointer,
with 90 % intervals. Durability ``async`` is LangGraph's default (a superstep's
checkpoint is written while the next one runs; ``ainvoke`` returns once all are written);
``sync`` writes it before the next step. Per saver row, ``checkpoints_N`` and
``write_batches_N`` count ``aput`` and ``aput_writes`` calls per N-task run. Prints JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import sys
import uuid
from collections import Counter
from contextlib import AsyncExitStack
from functools import partial
from importlib.metadata import version
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from benchmarks.costs import WARM_UP, interleave, summarize

BASE = "LangGraph, no checkpointer"
SIZES = (1, 9)


class State(TypedDict, total=False):
    question: str
    tasks: int
    results: Annotated[list[str], operator.add]
    answer: str


class Task(TypedDict):
    name: str


def plan(state: State) -> dict[str, Any]:
    return {}


def fan_out(state: State) -> list[Send]:
    return [Send("fetch", Task(name=f"v{i}")) for i in range(1, state["tasks"] + 1)]


async def fetch(task: Task) -> dict[str, Any]:
    return {"results": [f"value of {task['name']}"]}


def join(state: State) -> dict[str, Any]:
    return {"answer": ", ".join(state["results"])}


def build(checkpointer: Any) -> Any:
    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("fetch", fetch)
    graph.add_node("join", join)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["fetch"])
    graph.add_edge("fetch", "join")
    graph.add_edge("join", END)
    return graph.compile(checkpointer=checkpointer)


def counted(saver: Any, calls: Counter[str]) -> Any:
    """`saver` with its checkpoint writes (``aput``) and task-write batches (``aput_writes``)
    counted into `calls`."""
    for name in ("aput", "aput_writes"):
        method = getattr(saver, name)

        async def wrapper(*args: Any, _method: Any = method, _name: str = name) -> Any:
            calls[_name] += 1
            return await _method(*args)

        setattr(saver, name, wrapper)
    return saver


class Variant:
    def __init__(self, name: str, saver: Any, durability: str | None = None) -> None:
        self.name, self.durability = name, durability
        self.calls: Counter[str] = Counter()
        self.graph = build(counted(saver, self.calls) if saver is not None else None)
        self.writes: dict[int, Counter[str]] = {n: Counter() for n in SIZES}

    async def run(self, tasks: int, question: str) -> None:
        config = {"configurable": {"thread_id": uuid.uuid4().hex}}
        options = {"durability": self.durability} if self.durability else {}
        self.calls.clear()
        out = await self.graph.ainvoke({"question": question, "tasks": tasks}, config, **options)
        self.writes[tasks] += self.calls
        if len(out["results"]) != tasks:
            raise RuntimeError(f"{self.name}: {len(out['results'])} results for {tasks} tasks")


async def measure(dsns: list[str], durabilities: list[str], runs: int) -> dict[str, Any]:
    async with AsyncExitStack() as stack:
        variants = [
            Variant(BASE, None),
            Variant("LangGraph InMemorySaver", InMemorySaver(), "async"),
        ]
        for spec in dsns:
            label, _, dsn = spec.partition("=") if "=" in spec.split("://")[0] else ("", "", spec)
            saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(dsn))
            await saver.setup()
            name = "LangGraph AsyncPostgresSaver" + (f", {label}" if label else "")
            for mode in durabilities:
                suffix = "" if mode == "async" else f", durability={mode}"
                variants.append(Variant(name + suffix, saver, mode))
        points = {(v.name, n): partial(v.run, n) for v in variants for n in SIZES}
        samples, _ = await interleave(points, runs)
    rows = summarize(samples, BASE)
    counted_runs = runs + WARM_UP
    for v in variants:
        for n in SIZES if v.durability else ():  # per run: checkpoints, task-write batches
            rows[v.name][f"checkpoints_{n}"] = v.writes[n]["aput"] / counted_runs
            rows[v.name][f"write_batches_{n}"] = v.writes[n]["aput_writes"] / counted_runs
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dsn", action="append", default=[], help="[LABEL=]postgresql://...")
    parser.add_argument("--runs", type=int, default=40, help="runs per point")
    parser.add_argument(
        "--durability", nargs="+", default=["async", "sync"], choices=["async", "sync", "exit"]
    )
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    rows = asyncio.run(measure(args.dsn, args.durability, args.runs))
    packages = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-postgres", "psycopg")
    report = {
        "versions": {p: version(p) for p in packages},
        "python": sys.version.split()[0],
        "runs": args.runs,
        "load_1min_at_start": load,
        "base": BASE,
        "rows": rows,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
