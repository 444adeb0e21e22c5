"""Plan correctness on BFCL's ``parallel`` and ``parallel_multiple`` items.

Every system answers the same sampled items on the same model; each answer is judged by
the AST check of :mod:`evals.checker`. Run ``python -m evals.bfcl --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llama_index.core.llms import LLM

from evals import systems
from evals.checker import check_item
from evals.data import CATEGORIES, DEFAULT_CACHE, Item, load_items, wheel_path
from evals.systems import Attempt

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class Outcome:
    """One system's result on one item."""

    item: str
    system: str
    correct: bool
    calls_correct: int
    calls_expected: int
    malformed: bool
    unknown_tool_calls: int
    seconds: float
    calls: list[Any] = field(default_factory=list)
    text: str = ""
    notes: list[str] = field(default_factory=list)


@dataclass
class Summary:
    """One system's totals over the run (a row of the table)."""

    system: str
    n: int = 0
    items_correct: int = 0
    calls_correct: int = 0
    calls_expected: int = 0
    malformed: int = 0
    unknown_tool_calls: int = 0
    seconds: float = 0.0
    failures: int = 0
    """Attempts that raised or timed out (counted as malformed and wrong)."""


def sample_items(items: Sequence[Item], n: int, seed: int) -> list[Item]:
    """`n` items chosen at random with `seed` (all when `n` is 0 or too large), in file order."""
    if n <= 0 or n >= len(items):
        return list(items)
    chosen = set(random.Random(seed).sample(range(len(items)), n))
    return [item for i, item in enumerate(items) if i in chosen]


async def evaluate(
    item: Item, name: str, system: systems.System, llm: LLM, timeout: float | None = None
) -> Outcome:
    """Run one system on one item and judge its calls."""
    started = time.perf_counter()
    try:
        attempt = await asyncio.wait_for(systems.run_system(system, item, llm), timeout)
    except TimeoutError:
        attempt = Attempt(malformed=True, notes=[f"timed out after {timeout} s"])
    except Exception as e:  # one failing item must not end the run; it counts as wrong
        attempt = Attempt(malformed=True, notes=[f"failed: {type(e).__name__}: {e}"])
    seconds = time.perf_counter() - started
    verdict = check_item(item.functions, attempt.calls, item.ground_truth)
    return Outcome(
        item=item.id,
        system=name,
        correct=verdict.correct,
        calls_correct=verdict.calls_correct,
        calls_expected=verdict.expected,
        malformed=attempt.malformed,
        unknown_tool_calls=attempt.unknown_tool_calls,
        seconds=round(seconds, 3),
        calls=[list(c) for c in attempt.calls],
        text=attempt.text,
        notes=attempt.notes + verdict.errors,
    )


def summarize(outcomes: Sequence[Outcome], names: Sequence[str]) -> list[Summary]:
    """Totals per system, in the order of `names`."""
    rows = {name: Summary(name) for name in names}
    for o in outcomes:
        row = rows[o.system]
        row.n += 1
        row.items_correct += o.correct
        row.calls_correct += o.calls_correct
        row.calls_expected += o.calls_expected
        row.malformed += o.malformed
        row.unknown_tool_calls += o.unknown_tool_calls
        row.seconds += o.seconds
        row.failures += any(n.startswith(("failed:", "timed out")) for n in o.notes)
    return list(rows.values())


def markdown(rows: Sequence[Summary], model: str, date: str, notes: Sequence[str] = ()) -> str:
    """The results table (plus notes on skipped systems)."""
    lines = [
        "| system | N | model | date | items correct | calls correct | malformed "
        "| unknown-tool calls | mean plan s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        mean = r.seconds / r.n if r.n else 0.0
        items = f"{r.items_correct}/{r.n} ({_pct(r.items_correct, r.n)})"
        calls = f"{r.calls_correct}/{r.calls_expected} ({_pct(r.calls_correct, r.calls_expected)})"
        lines.append(
            f"| {r.system} | {r.n} | {model} | {date} | {items} | {calls} | {r.malformed} "
            f"| {r.unknown_tool_calls} | {mean:.1f} |"
        )
    lines += [f"\n{note}" for note in notes]
    return "\n".join(lines) + "\n"


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:.0f}%" if b else "-"


async def run_eval(
    items: Sequence[Item],
    names: Sequence[str],
    llm: LLM,
    timeout: float | None = None,
    progress: Any = None,
) -> list[Outcome]:
    """Every system on every item, item by item (so a cut-short run stays comparable)."""
    chosen = {name: systems.get(name) for name in names}
    outcomes = []
    for i, item in enumerate(items, 1):
        for name, system in chosen.items():
            outcome = await evaluate(item, name, system, llm, timeout)
            outcomes.append(outcome)
            if progress is not None:
                mark = "ok" if outcome.correct else "wrong"
                print(
                    f"[{i}/{len(items)}] {item.id} {name}: {mark} "
                    f"({outcome.calls_correct}/{outcome.calls_expected} calls, "
                    f"{outcome.seconds:.1f} s)",
                    file=progress,
                    flush=True,
                )
    return outcomes


def split_available(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """The systems that can run, and a note for each that cannot."""
    ready, notes = [], []
    for name in names:
        try:
            systems.get(name)
        except LookupError as e:
            notes.append(f"Skipped `{name}`: {e}.")
        else:
            ready.append(name)
    return ready, notes


def write_results(out: Path, table: str, meta: dict[str, Any], outcomes: Sequence[Any]) -> None:
    """The table as ``<out>.md``, `meta` and the outcomes (dataclasses) as ``<out>.json``."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    payload = {**meta, "outcomes": [asdict(o) for o in outcomes]}
    out.with_suffix(".json").write_text(json.dumps(payload, indent=1, default=str) + "\n")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m evals.bfcl", description=__doc__)
    p.add_argument("--sample", type=int, default=20, help="items to sample (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--systems", default="text,baseline,text+grammar,json")
    p.add_argument("--categories", default=",".join(CATEGORIES))
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "latest.json")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the wheel is kept")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per system and item")
    return p.parse_args(argv)


async def main_async(args: argparse.Namespace) -> int:
    """Load, sample, run, print and save."""
    from llm_compiler.models.resolve import resolve_llm

    names, notes = split_available([s for s in args.systems.split(",") if s])
    categories = [c for c in args.categories.split(",") if c]
    items = sample_items(load_items(wheel_path(args.cache), categories), args.sample, args.seed)
    for note in notes:
        print(note, file=sys.stderr)
    resolved = resolve_llm()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    async with resolved as llm:
        outcomes = await run_eval(items, names, llm, args.timeout, progress=sys.stderr)
    rows = summarize(outcomes, names)
    table = markdown(rows, resolved.description, date, notes)
    print(table)
    meta = {
        "model": resolved.description,
        "date": date,
        "categories": categories,
        "sample": args.sample,
        "seed": args.seed,
        "items": [i.id for i in items],
        "summary": [asdict(r) for r in rows],
        "notes": notes,
    }
    write_results(args.out, table, meta, outcomes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m evals.bfcl``."""
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
