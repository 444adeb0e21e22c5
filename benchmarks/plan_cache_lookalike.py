"""The plan cache against the uncached run: on the question families, and on questions that
look like an answered one but mean something else.

Usage: ``python -m benchmarks.plan_cache_lookalike``; writes
``benchmarks/results/plan_cache_lookalike.json``.

- **Families**: the 5 shapes of :mod:`benchmarks.plan_cache` x 8 fillings on its
  latency-modelled cloud planner (which writes the right plan for each question), ``lookup``
  and ``subtract`` declared ``pure``, with and without the plan cache, interleaved filling by
  filling: planner calls, mean and median time to the first task, and the answers (every
  task's tool, arguments, status and output; the scripted joiner finishes) that differ from
  the uncached run's.
- **Look-alikes**: each case asks a seed question, then a probe that looks like it (a value
  the plan derived, operands in another order, another tool set, a negation), of a fresh
  workflow with the plan cache and of one without: whether the probe's answer differs from
  the uncached one, and whether the probe was planned from a template.

A measurement: it asserts nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.tools import BaseTool, FunctionTool

from benchmarks.model import CLOUD
from benchmarks.plan_cache import RESULTS, SHAPES, Asker, fillings
from llm_compiler import ToolPolicy

PURE = ToolPolicy(side_effect="pure")
FAMILY_POLICIES = {"lookup": ToolPolicy(side_effect="pure", cache_ttl=600), "subtract": PURE}
MODES = {"no_cache": {"cache_plans": False}, "plan_cache": {"cache_plans": True}}


async def families(n: int) -> dict[str, Any]:
    """Every shape's `n` fillings with and without the plan cache (one workflow per shape
    and mode; the result cache off, so only the plan cache differs)."""
    askers = {
        mode: [
            Asker(CLOUD, policies=FAMILY_POLICIES, cache_results=False, **config) for _ in SHAPES
        ]
        for mode, config in MODES.items()
    }
    fills = [fillings(n, seed=shape) for shape in range(len(SHAPES))]
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    for i in range(n):
        for mode in list(MODES)[i % 2 :] + list(MODES)[: i % 2]:

            async def one(shape: int, mode: str = mode, i: int = i) -> dict[str, Any]:
                question, plan, _ = SHAPES[shape]
                f = fills[shape][i]
                return await askers[mode][shape].ask(question.format(**f), plan.format(**f))

            rows[mode] += await asyncio.gather(*(one(s) for s in range(len(SHAPES))))
    out: dict[str, Any] = {}
    for mode, r in rows.items():
        firsts = [x["first_task_s"] for x in r if x["first_task_s"] is not None]
        out[mode] = {
            "questions": len(r),
            "planner_calls": sum(x["planner_calls"] for x in r),
            "first_task_s_mean": round(statistics.mean(firsts), 3),
            "first_task_s_median": round(statistics.median(firsts), 3),
        }
    off, on = out["no_cache"], out["plan_cache"]
    out["planner_calls_cut_pct"] = round(100 * (1 - on["planner_calls"] / off["planner_calls"]), 1)
    out["first_task_cut_pct"] = round(
        100 * (1 - on["first_task_s_mean"] / off["first_task_s_mean"]), 1
    )
    pairs = zip(rows["no_cache"], rows["plan_cache"], strict=True)
    out["first_task_median_cut_pct"] = round(
        100 * (1 - on["first_task_s_median"] / off["first_task_s_median"]), 1
    )
    out["answers_differing"] = sum(a["results"] != b["results"] for a, b in pairs)
    return out


def calc_tools() -> list[BaseTool]:
    def multiply(a: float, b: float) -> float:
        """a * b."""
        return a * b

    def subtract(a: float, b: float) -> float:
        """a - b."""
        return a - b

    def scale_quantity(amount: float, servings: float, target: float) -> float:
        """The amount of an ingredient for `target` servings, given `amount` for `servings`."""
        return amount * target / servings

    def order_status(order: int) -> str:
        """The status of an order."""
        return f"order {order}: shipped"

    def send_email(to: str) -> str:
        """Send a reminder email to a person."""
        return f"sent to {to}"

    fns = [multiply, subtract, scale_quantity, order_status, send_email]
    return [FunctionTool.from_defaults(fn=f) for f in fns]


def lookup_tools() -> dict[str, BaseTool]:
    def club_info(name: str) -> str:
        """Facts about a football club."""
        return f"club {name}" if name == "Liverpool" else "could not find"

    def bank_info(name: str) -> str:
        """Facts about a bank."""
        return f"bank {name}" if name == "Santander" else "could not find"

    return {f.__name__: FunctionTool.from_defaults(fn=f) for f in (club_info, bank_info)}


class ByName:
    """A tool retriever that gives the bank tool for a question naming the bank, else the
    club tool (each question its own tool set)."""

    def __init__(self) -> None:
        self.tools = lookup_tools()

    async def aretrieve(self, query: object) -> list[BaseTool]:
        text = str(getattr(query, "query_str", query))
        return [self.tools["bank_info" if "Santander" in text else "club_info"]]


PURE_LOOKUPS = {"club_info": PURE, "bank_info": PURE}
CALC_POLICIES = {n: PURE for n in ("multiply", "subtract", "scale_quantity", "order_status")}
SAUCE = "A sauce for {} servings needs 150 g of butter; how many grams for twice as many servings?"


@dataclass
class Case:
    """A seed question and a look-alike probe, each with the plan a good planner writes."""

    name: str
    kind: str
    seed: tuple[str, str]
    probe: tuple[str, str]
    config: dict[str, Any] = field(default_factory=dict)


def plan(*lines: str) -> str:
    return "\n".join(f"{i}. {line}" for i, line in enumerate([*lines, "join()"], 1)) + (
        "<END_OF_PLAN>"
    )


CASES = [
    Case(
        "seconds_in_minutes",
        "derived",
        ("How many seconds are in 60 minutes?", plan("multiply(a=60, b=60)")),
        ("How many seconds are in 5 minutes?", plan("multiply(a=5, b=60)")),
    ),
    Case(
        "days_in_weeks",
        "derived",
        ("How many days are in 7 weeks?", plan("multiply(a=7, b=7)")),
        ("How many days are in 3 weeks?", plan("multiply(a=3, b=7)")),
    ),
    Case(
        "twice_as_many_servings",
        "derived",
        (SAUCE.format(4), plan("scale_quantity(amount=150, servings=4, target=8)")),
        (SAUCE.format(5), plan("scale_quantity(amount=150, servings=5, target=10)")),
    ),
    Case(
        "minutes_in_hours",
        "derived",
        ("How many minutes are in 2 hours?", plan("multiply(a=2, b=60)")),
        ("How many minutes are in 3 hours?", plan("multiply(a=3, b=60)")),
    ),
    Case(
        "percent_of",
        "derived",
        ("What is 20% of 60?", plan("multiply(a=0.2, b=60)")),
        ("What is 20% of 45?", plan("multiply(a=0.2, b=45)")),
    ),
    Case(
        "percent_changed",
        "derived",
        ("What is 20% of 60?", plan("multiply(a=0.2, b=60)")),
        ("What is 35% of 60?", plan("multiply(a=0.35, b=60)")),
    ),
    Case(
        "subtract_from",
        "operand_order",
        ("Subtract 3 from 5.", plan("subtract(a=5, b=3)")),
        ("Subtract 8 from 2.", plan("subtract(a=2, b=8)")),
    ),
    Case(
        "minus_swapped",
        "operand_order",
        ("What is 5 minus 3?", plan("subtract(a=5, b=3)")),
        ("What is 3 minus 5?", plan("subtract(a=3, b=5)")),
    ),
    Case(
        "minus_equal_operands",
        "operand_order",
        ("What is 5 minus 3?", plan("subtract(a=5, b=3)")),
        ("What is 4 minus 4?", plan("subtract(a=4, b=4)")),
    ),
    Case(
        "retrieved_tool_set",
        "other_tools",
        ("Look up Liverpool.", plan('club_info(name="Liverpool")')),
        ("Look up Santander.", plan('bank_info(name="Santander")')),
        {"tools": "retriever", "max_replans": 0},
    ),
    Case(
        "alternative_tool",
        "other_tools",
        ("Look up Liverpool.", plan('club_info(name="Liverpool")')),
        ("Look up Santander.", plan('bank_info(name="Santander")')),
        {"tools": "both", "max_replans": 0},
    ),
    Case(
        "status_then_do_not_cancel",
        "negation",
        ("What is the status of order 42?", plan("order_status(order=42)")),
        ("What is the status of order 42? Do not cancel it.", plan("order_status(order=42)")),
    ),
    Case(
        "email_nobody",
        "negation",
        ("Send a reminder to Alice.", plan('send_email(to="Alice")')),
        ("Send a reminder to nobody.", plan()),
    ),
]


def asker(case: Case, cache: bool) -> Asker:
    config = dict(case.config)
    kind = config.pop("tools", None)
    if kind is not None:
        lookups = PURE_LOOKUPS
        if kind == "retriever":
            config["tool_retriever"] = ByName()
        tools: list[Any] = [] if kind == "retriever" else list(lookup_tools().values())
        return Asker(
            CLOUD,
            tool_list=tools,
            policies=lookups,
            cache_plans=cache,
            cache_results=False,
            **config,
        )
    return Asker(
        CLOUD,
        tool_list=calc_tools(),
        policies=CALC_POLICIES,
        cache_plans=cache,
        cache_results=False,
        **config,
    )


async def lookalike(case: Case) -> dict[str, Any]:
    """The probe's answer with and without the plan cache, each after the seed."""
    rows = {}
    for cache in (False, True):
        a = asker(case, cache)
        await a.ask(*case.seed)
        rows[cache] = await a.ask(*case.probe)
    return {
        "case": case.name,
        "kind": case.kind,
        "from_template": rows[True]["planner_calls_saved"] > 0,
        "differs": rows[True]["results"] != rows[False]["results"],
        "uncached": rows[False]["results"],
        "cached": rows[True]["results"],
    }


async def main() -> None:
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_avg_1_5_15_start": [round(x, 2) for x in os.getloadavg()],
        "model": CLOUD.describe(),
    }
    report["families"] = await families(8)
    cases = [await lookalike(c) for c in CASES]
    report["lookalikes"] = {
        "cases": len(cases),
        "differing": [c["case"] for c in cases if c["differs"]],
        "from_template": [c["case"] for c in cases if c["from_template"]],
        "rows": cases,
    }
    report["load_avg_1_5_15_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2, default=repr))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "plan_cache_lookalike.json"
    out.write_text(json.dumps(report, indent=2, default=repr) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
