"""Plans for the user's own tools: small tool sets unlike the demo's, plans checked.

A new user's first script has two or three tools of their own and no hand-written
examples. Each case gives such a tool set (plain Python functions, sync and async), a
question and the calls that answer it; the first plan is compiled (``compile_plan``:
nothing runs) and its calls compared with the expected ones: right tool, each expected
argument equal (strings compared as BFCL does, numbers within 0.5 %), or a reference to
a task of the expected tool where the call needs an earlier result. A case is right when
every expected call is matched by its own planned call and there are no others.
Run ``python -m evals.own_tools --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from llama_index.core.llms import LLM

from evals.bfcl import write_results
from evals.checker import standardize
from llm_compiler import CompiledPlan, LLMCompilerWorkflow
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.llmcompiler.prompts import ExampleSource

RESULTS_DIR = Path(__file__).resolve().parent / "results"

# ----------------------------------------------------------------------------- tool sets
# Real (offline) tools: the eval only plans, but the functions are what a user would write.

_TEMPERATURES = {"oslo": 4.0, "madrid": 24.0, "cairo": 31.0, "lima": 19.0, "tokyo": 16.0}


async def get_weather(city: str) -> float:
    """The current temperature in a city, in degrees Celsius."""
    await asyncio.sleep(0)
    return _TEMPERATURES.get(city.lower(), 15.0)


def convert_c_to_f(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 + 32


_FILES = {"notes.md": "buy milk\ncall Bob", "todo.txt": "fix the bike", "docs/plan.md": "ship it"}


def list_files(directory: str) -> list[str]:
    """The names of the files in a directory."""
    prefix = directory.rstrip("/") + "/"
    return [p for p in _FILES if p.startswith(prefix)]


def read_file(path: str) -> str:
    """The text content of a file."""
    return _FILES.get(path, "")


def count_words(text: str) -> int:
    """The number of words in a text."""
    return len(text.split())


def day_of_week(day: str) -> str:
    """The weekday (Monday ... Sunday) of a date written YYYY-MM-DD."""
    return date.fromisoformat(day).strftime("%A")


def add_days(day: str, days: int) -> str:
    """The date (YYYY-MM-DD) a number of days after a date written YYYY-MM-DD."""
    return (date.fromisoformat(day) + timedelta(days=days)).isoformat()


async def stock_price(symbol: str) -> float:
    """The latest price of a stock, in US dollars, by its ticker symbol."""
    await asyncio.sleep(0)
    return {"NVDA": 120.0, "TSLA": 250.0, "IBM": 180.0}.get(symbol.upper(), 100.0)


def convert_currency(amount: float, to_currency: str) -> float:
    """Convert an amount of US dollars to another currency (EUR, GBP or JPY)."""
    return amount * {"EUR": 0.92, "GBP": 0.79, "JPY": 150.0}.get(to_currency.upper(), 1.0)


TOOL_SETS: dict[str, list[Callable[..., Any]]] = {
    "weather": [get_weather, convert_c_to_f],
    "files": [list_files, read_file, count_words],
    "dates": [day_of_week, add_days],
    "stocks": [stock_price, convert_currency],
}

# ----------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Ref:
    """An argument that must be the result of a task calling `tool`."""

    tool: str


ExpectedCall = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Case:
    """A question on one tool set and the calls that answer it."""

    tools: str
    question: str
    expect: tuple[ExpectedCall, ...]


CASES = (
    Case(
        "weather",
        "What is the weather in Oslo and in Madrid? Give Oslo's temperature in Fahrenheit.",
        (
            ("get_weather", {"city": "Oslo"}),
            ("get_weather", {"city": "Madrid"}),
            ("convert_c_to_f", {"celsius": Ref("get_weather")}),
        ),
    ),
    Case(
        "weather",
        "How warm is it in Cairo and in Lima?",
        (("get_weather", {"city": "Cairo"}), ("get_weather", {"city": "Lima"})),
    ),
    Case(
        "weather",
        "Convert 30 degrees Celsius to Fahrenheit.",
        (("convert_c_to_f", {"celsius": 30}),),
    ),
    Case(
        "weather",
        "What is the temperature in Tokyo in Fahrenheit?",
        (("get_weather", {"city": "Tokyo"}), ("convert_c_to_f", {"celsius": Ref("get_weather")})),
    ),
    Case(
        "files",
        "Show me the contents of todo.txt and of notes.md.",
        (("read_file", {"path": "todo.txt"}), ("read_file", {"path": "notes.md"})),
    ),
    Case(
        "files", "Which files are in the docs directory?", (("list_files", {"directory": "docs"}),)
    ),
    Case(
        "files",
        "How many words are in todo.txt?",
        (("read_file", {"path": "todo.txt"}), ("count_words", {"text": Ref("read_file")})),
    ),
    Case("dates", "What day of the week is 2025-12-25?", (("day_of_week", {"day": "2025-12-25"}),)),
    Case(
        "dates",
        "On which weekdays fall 2026-07-04 and 2027-01-01?",
        (("day_of_week", {"day": "2026-07-04"}), ("day_of_week", {"day": "2027-01-01"})),
    ),
    Case(
        "dates",
        "What is the date 45 days after 2026-02-10?",
        (("add_days", {"day": "2026-02-10", "days": 45}),),
    ),
    Case(
        "stocks",
        "What are the stock prices of NVDA and TSLA?",
        (("stock_price", {"symbol": "NVDA"}), ("stock_price", {"symbol": "TSLA"})),
    ),
    Case(
        "stocks",
        "What is the price of IBM stock in EUR?",
        (
            ("stock_price", {"symbol": "IBM"}),
            ("convert_currency", {"amount": Ref("stock_price"), "to_currency": "EUR"}),
        ),
    ),
)

# ----------------------------------------------------------------------------- checking


def _value_fits(want: Any, got: Any, tool_of: dict[int, str]) -> bool:
    if isinstance(want, Ref):
        return isinstance(got, dict) and tool_of.get(got.get("$ref", -1)) == want.tool
    if isinstance(want, str):
        return isinstance(got, str) and standardize(got) == standardize(want)
    if isinstance(want, int | float) and isinstance(got, int | float):
        return abs(got - want) <= 0.005 * max(abs(want), 1e-9)
    return bool(want == got)


def _fits(expected: ExpectedCall, planned: ExpectedCall, tool_of: dict[int, str]) -> bool:
    name, args = expected
    return planned[0] == name and all(
        k in planned[1] and _value_fits(v, planned[1][k], tool_of) for k, v in args.items()
    )


def matched(
    expect: Sequence[ExpectedCall], planned: Sequence[ExpectedCall], tool_of: dict[int, str]
) -> int:
    """Expected calls matched one to one by planned calls (greedy, in order)."""
    free = list(range(len(planned)))
    count = 0
    for want in expect:
        hit = next((i for i in free if _fits(want, planned[i], tool_of)), None)
        if hit is not None:
            free.remove(hit)
            count += 1
    return count


@dataclass
class Outcome:
    """One case's plan and verdict."""

    tools: str
    question: str
    plan: str
    calls_right: int
    calls_expected: int
    calls_planned: int
    right: bool
    seconds: float
    errors: list[str] = field(default_factory=list)


def judge(case: Case, plan: CompiledPlan, seconds: float) -> Outcome:
    """Compare a compiled plan with the case's expected calls."""
    tasks = [t for t in plan.tasks if not t.is_join]
    tool_of = {t.id: t.tool for t in tasks}
    planned = [(t.tool, dict(t.kwargs)) for t in tasks]
    right = matched(case.expect, planned, tool_of)
    errors = [*plan.errors, *(f"{t.id}. {t.error}" for t in tasks if t.error)]
    return Outcome(
        tools=case.tools,
        question=case.question,
        plan=plan.text.strip(),
        calls_right=right,
        calls_expected=len(case.expect),
        calls_planned=len(planned),
        right=right == len(case.expect) == len(planned) and not errors,
        seconds=round(seconds, 2),
        errors=errors,
    )


async def run_case(
    case: Case, llm: LLM, examples: ExampleSource | None = None, constrained: bool | None = None
) -> Outcome:
    """Compile the first plan for `case` on its tool set: default settings (constrained
    decoding where the model has it), or the given choice of few-shot plans."""
    dialect = (
        LLMCompilerDialect()
        if examples is None
        else LLMCompilerDialect(constrained_examples=examples)
    )
    workflow = LLMCompilerWorkflow(
        tools=TOOL_SETS[case.tools], llm=llm, dialect=dialect, constrained=constrained
    )
    started = time.perf_counter()
    plan = await workflow.compile_plan(case.question)
    return judge(case, plan, time.perf_counter() - started)


def markdown(outcomes: Sequence[Outcome], title: str) -> str:
    """Totals and one row per case."""
    right = sum(o.right for o in outcomes)
    calls = sum(o.calls_right for o in outcomes)
    expected = sum(o.calls_expected for o in outcomes)
    lines = [
        f"{title}: **{right}/{len(outcomes)}** plans right, {calls}/{expected} calls.",
        "",
        "| tools | question | plan | calls right | right |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        plan = o.plan.replace("|", "/").replace("\n", "; ")[:200]
        lines.append(
            f"| {o.tools} | {o.question} | `{plan}` | {o.calls_right}/{o.calls_expected} "
            f"| {'yes' if o.right else 'no'} |"
        )
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> int:
    """Plan every case on the configured model; print and save the results."""
    from llm_compiler.models.resolve import resolve_llm

    llm = resolve_llm()
    if args.sampling:
        llm.sampling = {**llm.sampling, **sampling(args.sampling)}  # type: ignore[attr-defined]
    date_ = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    cases = CASES[: args.limit] if args.limit else CASES
    outcomes = []
    async with llm:  # stops the embedded model's server at the end
        for i, case in enumerate(cases, 1):
            outcome = await run_case(case, llm, args.examples)
            mark = "right" if outcome.right else "wrong"
            print(
                f"[{i}/{len(cases)}] {mark} {outcome.seconds:.1f} s: {case.question}",
                file=sys.stderr,
            )
            outcomes.append(outcome)
    choice = args.examples or "default examples"
    table = markdown(outcomes, f"Own-tool plans on {llm.description} ({choice}), {date_}")
    print(table)
    right, n = sum(o.right for o in outcomes), len(outcomes)
    meta = {"model": llm.description, "date": date_, "examples": choice, "right": right, "n": n,
            "sampling": getattr(llm, "sampling", None)}  # fmt: skip
    write_results(args.out, table, meta, outcomes)
    return 0


def sampling(spec: str) -> dict[str, float]:
    """``repeat_penalty=1.1,top_k=40`` as a dict of numbers (``--sampling``)."""
    pairs = [item.split("=", 1) for item in spec.split(",") if item]
    return {key.strip(): float(value) for key, value in pairs}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m evals.own_tools``."""
    p = argparse.ArgumentParser(prog="python -m evals.own_tools", description=__doc__)
    p.add_argument("--limit", type=int, default=0, help="only the first N cases")
    p.add_argument(
        "--examples",
        choices=["own", "mixed", "builtin", "varied"],
        default=None,
        help="few-shot plans of constrained prompts (default: the dialect's default)",
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "own_tools.json")
    p.add_argument(
        "--sampling",
        default="",
        help="the embedded model's sampling settings for this run, e.g. repeat_penalty=1.0",
    )
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
