"""End-to-end answers: full runs (plans, tools, joiner) on the demo tools, answers checked.

The questions need the offline encyclopedia and calculator of ``llm_compiler.demo.tools``;
an answer is right when it contains every expected name (case, accents and punctuation
ignored) and every expected number (commas and "million"/"billion" understood, 0.5 %
tolerance). Run ``python -m evals.answers --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from llama_index.core.llms import LLM

from evals.bfcl import write_results
from llm_compiler import LLMCompilerWorkflow
from llm_compiler.demo import tools as demo_tools
from llm_compiler.tools import ToolLike

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Question:
    """A question and what its answer must contain."""

    text: str
    expect: tuple[str | float, ...]


QUESTIONS = (
    Question("What are the capitals of France and Japan?", ("Paris", "Tokyo")),
    Question("What is the capital of Australia?", ("Canberra",)),
    Question("What are the capitals of Canada and Brazil?", ("Ottawa", "Brasilia")),
    Question("How much higher is Mount Everest than K2, in metres?", (238,)),
    Question("In which year was Marie Curie born?", (1867,)),
    Question("How old was Alan Turing when he died?", (42,)),
    Question("How many years after Isaac Newton was Albert Einstein born?", (236,)),
    Question("How much longer is the Danube than the Rhine, in km?", (1620,)),
    Question("What is the total length of the Nile and the Amazon in km?", (13050,)),
    Question("What is the combined population of Spain and Italy?", (107_600_000,)),
    Question("How tall is Mount Kilimanjaro and how tall is Mont Blanc?", (5895, 4806)),
)

_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_NUMBER = re.compile(r"(\d+(?:\.\d+)?)(?:\s*(thousand|million|billion))?")


def normalize(text: str) -> str:
    """Lower case, no accents, punctuation as spaces, single spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def numbers(text: str) -> list[float]:
    """The numbers written in `text` (``8,849`` is one number; ``1.2 million`` is 1.2e6)."""
    plain = re.sub(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)", "", text.lower())
    out = []
    for value, scale in _NUMBER.findall(plain):
        out.append(float(value) * _SCALE.get(scale, 1.0))
    return out


def is_right(answer: str, expect: Sequence[str | float]) -> bool:
    """Whether `answer` contains every expected name and number."""
    said, found = f" {normalize(answer)} ", numbers(answer)
    for want in expect:
        if isinstance(want, str):
            if f" {normalize(want)} " not in said:
                return False
        elif not any(abs(n - want) <= 0.005 * abs(want) for n in found):
            return False
    return True


@dataclass
class AnswerOutcome:
    """One question's run."""

    question: str
    expect: list[Any]
    answer: str
    right: bool
    seconds: float
    rounds: int = 0
    tasks: list[str] = field(default_factory=list)
    error: str | None = None


def demo_workflow(llm: LLM) -> LLMCompilerWorkflow:
    """The workflow as the demo configures it."""
    tools = cast("list[ToolLike]", demo_tools.TOOLS)
    return LLMCompilerWorkflow(
        tools=tools,
        llm=llm,
        max_replans=1,
        tool_timeout=10,
        planner_examples=demo_tools.PLANNER_EXAMPLES,
        joiner_examples=demo_tools.JOINER_EXAMPLES,
        timeout=None,
    )


async def ask(workflow: LLMCompilerWorkflow, q: Question, timeout: float | None) -> AnswerOutcome:
    """Run one question to its answer and check it."""
    started = time.perf_counter()
    answer, rounds, tasks, error = "", 0, [], None
    try:
        output = await asyncio.wait_for(workflow.run(user_msg=q.text), timeout)
        answer = str(output)
        raw = getattr(output, "raw", None) or {}
        rounds = int(raw.get("rounds", 0))
        tasks = [f"{t['tool']}({t['kwargs']})" for t in raw.get("tasks", {}).values()]
    except TimeoutError:
        error = f"timed out after {timeout} s"
    except Exception as e:  # a failed run is a wrong answer, not the end of the eval
        error = f"{type(e).__name__}: {e}"
    return AnswerOutcome(
        question=q.text,
        expect=list(q.expect),
        answer=answer,
        right=error is None and is_right(answer, q.expect),
        seconds=round(time.perf_counter() - started, 2),
        rounds=rounds,
        tasks=tasks,
        error=error,
    )


async def run_answers(
    llm: LLM, questions: Sequence[Question] = QUESTIONS, timeout: float | None = None
) -> list[AnswerOutcome]:
    """Every question, one after another (the tools' parallelism is within a run)."""
    workflow = demo_workflow(llm)
    out = []
    for i, q in enumerate(questions, 1):
        outcome = await ask(workflow, q, timeout)
        mark = "right" if outcome.right else "wrong"
        print(f"[{i}/{len(questions)}] {mark} {outcome.seconds:.1f} s: {q.text}", file=sys.stderr)
        out.append(outcome)
    return out


def markdown(outcomes: Sequence[AnswerOutcome], model: str, date: str) -> str:
    """Accuracy and one row per question."""
    right = sum(o.right for o in outcomes)
    mean = sum(o.seconds for o in outcomes) / len(outcomes) if outcomes else 0.0
    lines = [
        f"Answer accuracy: **{right}/{len(outcomes)}** on {model}, {date} "
        f"(mean {mean:.1f} s a question).",
        "",
        "| question | expected | answer | right | s |",
        "|---|---|---|---|---|",
    ]
    for o in outcomes:
        answer = (o.error or o.answer).replace("|", "/").replace("\n", " ")[:160]
        expect = ", ".join(str(x) for x in o.expect)
        lines.append(
            f"| {o.question} | {expect} | {answer} | {'yes' if o.right else 'no'} "
            f"| {o.seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


async def main_async(args: argparse.Namespace) -> int:
    """Run the questions on the configured model, print and save the results."""
    from llm_compiler.models.resolve import resolve_llm

    resolved = resolve_llm()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    questions = QUESTIONS[: args.limit] if args.limit else QUESTIONS
    async with resolved as llm:
        outcomes = await run_answers(llm, questions, args.timeout)
    table = markdown(outcomes, resolved.description, date)
    print(table)
    right = sum(o.right for o in outcomes)
    meta = {"model": resolved.description, "date": date, "right": right, "n": len(outcomes)}
    write_results(args.out, table, meta, outcomes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m evals.answers``."""
    p = argparse.ArgumentParser(prog="python -m evals.answers", description=__doc__)
    p.add_argument("--limit", type=int, default=0, help="only the first N questions")
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "answers.json")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per question")
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
