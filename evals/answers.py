"""End-to-end answers: full runs (plans, tools, joiner) over two tool sets, answers checked.

The demo's offline encyclopedia and calculator (``llm_compiler.demo.tools``, with the
demo's examples) and a second set of the eval's own (``evals.stocks``: stock prices,
company profiles, currency conversion, no hand-written examples). Questions of four
kinds: one fact, two facts, comparisons that need a computation, and questions the
tools cannot answer. An answer is right when it contains every expected name (case,
accents and punctuation ignored) and every expected number (commas and
"million"/"billion" understood, 0.5 % tolerance); for a question the tools cannot
answer, when it says it could not find the answer. Other answers count as "could not
find" when they say so, else wrong. Questions marked held out were not looked at while
the prompts, examples and grammars were tuned; they are reported apart, by batch (batch
1 was read after its runs, before later changes; batch 2 was written after that, batch 3
after batch 2 had been read, batch 4 after batch 3, batch 5 after batch 4). Each
question can be asked of the Thought/Action joiner, the JSON joiner or both. Each question's
first task (seconds from ``run()`` to the first tool call) and answer are timed, the
questions one after another on one warm model, each asked once the model has read the
planner's prompt again after the last answer (``LLMCompilerWorkflow.warmed()``), as a
user who reads an answer before asking again. Run ``python -m evals.answers --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from llama_index.core.llms import LLM

from evals import stocks
from evals.bfcl import write_results
from llm_compiler import LLMCompilerWorkflow, TaskReady
from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.tools import ToolLike

RESULTS_DIR = Path(__file__).resolve().parent / "results"
Kind = Literal["fact", "facts", "compare", "missing"]
ToolSetName = Literal["demo", "stocks"]
Verdict = Literal["right", "could not find", "wrong"]


@dataclass(frozen=True)
class Question:
    """A question and what its answer must contain (nothing: the tools cannot answer it)."""

    text: str
    expect: tuple[str | float, ...]
    kind: Kind = "fact"
    tools: ToolSetName = "demo"
    held_out: bool = False
    batch: int = 1
    """Held-out questions of batch 2 were written after batch 1's answers had been read
    and the engine changed; they were run for the first time to be reported. Batch 3
    likewise after batch 2, batch 4 after batch 3, batch 5 after batch 4."""


def _q(text: str, expect: tuple[str | float, ...], kind: Kind, **kw: Any) -> Question:
    return Question(text, expect, kind, **kw)


QUESTIONS = (
    Question("What are the capitals of France and Japan?", ("Paris", "Tokyo"), "facts"),
    Question("What is the capital of Australia?", ("Canberra",)),
    Question("What are the capitals of Canada and Brazil?", ("Ottawa", "Brasilia"), "facts"),
    Question("How much higher is Mount Everest than K2, in metres?", (238,), "compare"),
    Question("In which year was Marie Curie born?", (1867,)),
    Question("How old was Alan Turing when he died?", (42,), "compare"),
    Question("How many years after Isaac Newton was Albert Einstein born?", (236,), "compare"),
    Question("How much longer is the Danube than the Rhine, in km?", (1620,), "compare"),
    Question("What is the total length of the Nile and the Amazon in km?", (13050,), "compare"),
    Question("What is the combined population of Spain and Italy?", (107_600_000,), "compare"),
    Question("How tall is Mount Kilimanjaro and how tall is Mont Blanc?", (5895, 4806), "facts"),
    # The questions new users asked of the demo (all in the encyclopedia but Peru).
    _q("Which is longer, the Danube or the Rhine, and by how much?", ("Danube", 1620), "compare"),
    _q("When was Ada Lovelace born and when did she die?", (1815, 1852), "facts"),
    _q("What is the capital of Peru?", (), "missing"),
    _q("How much higher is Mont Blanc than the Matterhorn?", (328,), "compare"),
    _q("What are the populations of Canada and Mexico?", (40_100_000, 129_000_000), "facts"),
    # The second tool set.
    _q("What is the price of NVDA stock?", (181.2,), "fact", tools="stocks"),
    _q("How much more does a share of MSFT cost than a share of AAPL?", (282.5,), "compare",
       tools="stocks"),
    _q("Who is the CEO of Microsoft?", ("Satya Nadella",), "fact", tools="stocks"),
    _q("When was Initech founded?", (), "missing", tools="stocks"),
    # Held out: not looked at while tuning.
    _q("How much longer is the Nile than the Mississippi, in km?", (2920,), "compare",
       held_out=True),
    _q("When was Charles Darwin born and when did he die?", (1809, 1882), "facts", held_out=True),
    _q("What is the capital of Argentina?", (), "missing", held_out=True),
    _q("How much taller is Kangchenjunga than Denali?", (2396,), "compare", held_out=True),
    _q("What are the populations of Germany and Japan?", (84_500_000, 124_000_000), "facts",
       held_out=True),
    _q("How long is the Volga river?", (), "missing", held_out=True),
    _q("How many years after Galileo Galilei was Isaac Newton born?", (79,), "compare",
       held_out=True),
    _q("What is the combined area of Norway and Switzerland in km2?", (365_087,), "compare",
       held_out=True),
    _q("What does one share of AAPL cost in euros?", (197.37,), "fact", tools="stocks",
       held_out=True),
    _q("How many employees do Apple and Tesla have together?", (289_000,), "compare",
       tools="stocks", held_out=True),
    _q("When was Tesla founded and who is its CEO?", (2003, "Elon Musk"), "facts",
       tools="stocks", held_out=True),
    _q("What is the stock price of Umbrella Corp?", (), "missing", tools="stocks",
       held_out=True),
    # Held out, batch 2: written before their first run, after batch 1 had been read.
    _q("How much longer is the Amazon than the Yangtze, in km?", (100,), "compare",
       held_out=True, batch=2),
    _q("When was Wolfgang Amadeus Mozart born and when did he die?", (1756, 1791), "facts",
       held_out=True, batch=2),
    _q("What is the capital of Chile?", (), "missing", held_out=True, batch=2),
    _q("How much higher is Aconcagua than Mount Fuji?", (3185,), "compare", held_out=True,
       batch=2),
    _q("What are the capitals of Egypt and Nigeria?", ("Cairo", "Abuja"), "facts",
       held_out=True, batch=2),
    _q("How old was Leonardo da Vinci when he died?", (67,), "compare", held_out=True,
       batch=2),
    _q("How tall is Mount Fuji?", (3776,), "fact", held_out=True, batch=2),
    _q("How high is the Zugspitze?", (), "missing", held_out=True, batch=2),
    _q("What is the combined population of Egypt and Nigeria?", (328_000_000,), "compare",
       held_out=True, batch=2),
    _q("What is the price of GOOGL stock in yen?", (29605.8,), "fact", tools="stocks",
       held_out=True, batch=2),
    _q("How much more does a share of TSLA cost than a share of NVDA?", (157.5,), "compare",
       tools="stocks", held_out=True, batch=2),
    _q("Who is the CEO of Alphabet and when was it founded?", ("Sundar Pichai", 2015), "facts",
       tools="stocks", held_out=True, batch=2),
    _q("What is the price of a share of Hooli?", (), "missing", tools="stocks", held_out=True,
       batch=2),
    _q("How many employees does NVIDIA have?", (36_000,), "fact", tools="stocks",
       held_out=True, batch=2),
    # Held out, batch 3: written after batch 2 had been read, before the changes that
    # followed it; run once, with the final code.
    _q("What is the population of Brazil?", (203_000_000,), "fact", held_out=True, batch=3),
    _q("How long is the Thames?", (346,), "fact", held_out=True, batch=3),
    _q("When was William Shakespeare born and when did he die?", (1564, 1616), "facts",
       held_out=True, batch=3),
    _q("What are the capitals of Germany and India?", ("Berlin", "New Delhi"), "facts",
       held_out=True, batch=3),
    _q("How much longer is the Seine than the Thames, in km?", (431,), "compare",
       held_out=True, batch=3),
    _q("How much taller is Denali than Mount Kilimanjaro?", (295,), "compare", held_out=True,
       batch=3),
    _q("What is the combined population of France and Germany?", (152_900_000,), "compare",
       held_out=True, batch=3),
    _q("How many years after William Shakespeare was Charles Darwin born?", (245,), "compare",
       held_out=True, batch=3),
    _q("What is the capital of Kenya?", (), "missing", held_out=True, batch=3),
    _q("How tall is Mount Elbrus?", (), "missing", held_out=True, batch=3),
    _q("Who is the CEO of NVIDIA?", ("Jensen Huang",), "fact", tools="stocks", held_out=True,
       batch=3),
    _q("What is the price of TSLA stock in pounds?", (250.64,), "fact", tools="stocks",
       held_out=True, batch=3),
    _q("When was Apple founded and how many employees does it have?", (1976, 164_000), "facts",
       tools="stocks", held_out=True, batch=3),
    _q("How much more does a share of MSFT cost than a share of GOOGL?", (310.6,), "compare",
       tools="stocks", held_out=True, batch=3),
    _q("How many more employees does Microsoft have than Apple?", (64_000,), "compare",
       tools="stocks", held_out=True, batch=3),
    _q("Who is the CEO of Wayne Enterprises?", (), "missing", tools="stocks", held_out=True,
       batch=3),
    # Held out, batch 4: written after batch 3 had been read, before the changes that
    # followed it; run once, with the final code.
    _q("What is the diameter of Jupiter?", (142_984,), "fact", held_out=True, batch=4),
    _q("In which year did Albert Einstein die?", (1955,), "fact", held_out=True, batch=4),
    _q("What are the capitals of Mexico and Australia?", ("Mexico City", "Canberra"), "facts",
       held_out=True, batch=4),
    _q("What are the populations of China and India?", (1_410_000_000, 1_430_000_000),
       "facts", held_out=True, batch=4),
    _q("How much longer is the Danube than the Seine, in km?", (2073,), "compare",
       held_out=True, batch=4),
    _q("How much higher is K2 than Aconcagua?", (1650,), "compare", held_out=True, batch=4),
    _q("What is the combined population of Canada and Australia?", (66_700_000,), "compare",
       held_out=True, batch=4),
    _q("How many years after Marie Curie was Alan Turing born?", (45,), "compare",
       held_out=True, batch=4),
    _q("What is the capital of Sweden?", (), "missing", held_out=True, batch=4),
    _q("How long is the Mekong river?", (), "missing", held_out=True, batch=4),
    _q("Who is the CEO of Apple?", ("Tim Cook",), "fact", tools="stocks", held_out=True,
       batch=4),
    _q("What does one share of NVDA cost in Swiss francs?", (144.96,), "fact", tools="stocks",
       held_out=True, batch=4),
    _q("When was Microsoft founded and who is its CEO?", (1975, "Satya Nadella"), "facts",
       tools="stocks", held_out=True, batch=4),
    _q("How much more does a share of AAPL cost than a share of NVDA?", (48.3,), "compare",
       tools="stocks", held_out=True, batch=4),
    _q("How many employees do NVIDIA and Alphabet have together?", (219_000,), "compare",
       tools="stocks", held_out=True, batch=4),
    _q("When was Cyberdyne Systems founded?", (), "missing", tools="stocks", held_out=True,
       batch=4),
    # Held out, batch 5: written after batch 4 had been read, before the changes that
    # followed it; run once, with the final code.
    _q("What is the diameter of Mars?", (6792,), "fact", held_out=True, batch=5),
    _q("In which year did Galileo Galilei die?", (1642,), "fact", held_out=True, batch=5),
    _q("What are the capitals of Spain and Brazil?", ("Madrid", "Brasilia"), "facts",
       held_out=True, batch=5),
    _q("What are the populations of Egypt and Brazil?", (105_000_000, 203_000_000), "facts",
       held_out=True, batch=5),
    _q("How much longer is the Yangtze than the Danube, in km?", (3450,), "compare",
       held_out=True, batch=5),
    _q("How much higher is Mount Everest than Mount Fuji?", (5073,), "compare", held_out=True,
       batch=5),
    _q("What is the combined population of Norway and Switzerland?", (14_400_000,), "compare",
       held_out=True, batch=5),
    _q("How many years after Ada Lovelace was Albert Einstein born?", (64,), "compare",
       held_out=True, batch=5),
    _q("What is the capital of Portugal?", (), "missing", held_out=True, batch=5),
    _q("How long is the Loire river?", (), "missing", held_out=True, batch=5),
    _q("Who is the chief executive of Alphabet?", ("Sundar Pichai",), "fact", tools="stocks",
       held_out=True, batch=5),
    _q("What does a share of MSFT cost in British pounds?", (378.88,), "fact", tools="stocks",
       held_out=True, batch=5),
    _q("When was NVIDIA founded and how many employees does it have?", (1993, 36_000),
       "facts", tools="stocks", held_out=True, batch=5),
    _q("How much more does a share of GOOGL cost than a share of NVDA?", (20.2,), "compare",
       tools="stocks", held_out=True, batch=5),
    _q("How many more employees does Alphabet have than Tesla?", (58_000,), "compare",
       tools="stocks", held_out=True, batch=5),
    _q("Who is the CEO of Globex?", (), "missing", tools="stocks", held_out=True, batch=5),
)  # fmt: skip

_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_NUMBER = re.compile(r"((?<![\w.,])-)?(\d+(?:\.\d+)?)(?:\s*(thousand|million|billion))?")


def normalize(text: str) -> str:
    """Lower case, no accents, punctuation as spaces, single spaces."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def numbers(text: str) -> list[float]:
    """The numbers written in `text` (``8,849`` is one number; ``1.2 million`` is 1.2e6;
    ``= -64`` is -64, so a difference taken the wrong way round is not the one asked
    for, but ``1815 - 1879`` is two numbers)."""
    plain = re.sub(r"(?<=\d)[,\u202f\u00a0](?=\d{3}\b)", "", text.lower())
    out = []
    for sign, value, scale in _NUMBER.findall(plain):
        out.append((-1.0 if sign else 1.0) * float(value) * _SCALE.get(scale, 1.0))
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


_NOT_FOUND = re.compile(
    r"could ?n[o']t find|can ?n[o']t find|cannot find|did ?n[o']t find|no (?:entry|information|"
    r"data|result)|not (?:found|in the)|do ?n[o']t know|unknown",
    re.I,
)


def says_not_found(answer: str) -> bool:
    """Whether an answer says it could not find what was asked."""
    return bool(_NOT_FOUND.search(answer))


def verdict(answer: str, expect: Sequence[str | float]) -> Verdict:
    """Right, "could not find" (said so although the tools have it) or wrong."""
    if not expect:
        return "right" if says_not_found(answer) else "wrong"
    if is_right(answer, expect):
        return "right"
    return "could not find" if says_not_found(answer) else "wrong"


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
    verdict: Verdict = "wrong"
    first_task: float | None = None
    """Seconds from ``run()`` to the first tool call (None: no tool ran)."""
    kind: Kind = "fact"
    tools: ToolSetName = "demo"
    held_out: bool = False
    batch: int = 1
    joiner: str = "text"
    """The joiner's reply format (``LLMCompilerDialect(joiner=...)``)."""


def demo_workflow(llm: LLM, **options: Any) -> LLMCompilerWorkflow:
    """The workflow as the demo configures it."""
    tools = cast("list[ToolLike]", demo_tools.TOOLS)
    dialect = LLMCompilerDialect(demo_tools.PLANNER_EXAMPLES, demo_tools.JOINER_EXAMPLES, **options)
    return LLMCompilerWorkflow(
        tools=tools, llm=llm, max_replans=1, tool_timeout=10, dialect=dialect, timeout=None
    )


def user_workflow(tools: Sequence[ToolLike], llm: LLM, **options: Any) -> LLMCompilerWorkflow:
    """A user's own tools, with the defaults a new user gets (no examples of their own)."""
    return LLMCompilerWorkflow(
        tools=list(tools),
        llm=llm,
        max_replans=1,
        tool_timeout=10,
        dialect=LLMCompilerDialect(**options),
        timeout=None,
    )


def stocks_workflow(llm: LLM, **options: Any) -> LLMCompilerWorkflow:
    """The second tool set, as a new user's script would have it."""
    return user_workflow(cast("list[ToolLike]", stocks.TOOLS), llm, **options)


@dataclass
class Run:
    """One question's run: its answer (or error), timings and the run's summary."""

    answer: str = ""
    error: str | None = None
    first_task: float | None = None
    seconds: float = 0.0
    rounds: int = 0
    tasks: list[dict[str, Any]] = field(default_factory=list)
    """Each task of the summary: ``round``, ``tool``, ``args``, ``status``, ``output``."""


async def run_once(workflow: LLMCompilerWorkflow, text: str, timeout: float | None) -> Run:
    """Run one question to its answer, timing its first task; a failure is kept, not raised."""
    started = time.perf_counter()
    run = Run()
    try:
        handler = workflow.run(user_msg=text)

        async def finish() -> Any:
            async for ev in handler.stream_events():
                if run.first_task is None and isinstance(ev, TaskReady):
                    run.first_task = round(time.perf_counter() - started, 2)
            return await handler

        output = await asyncio.wait_for(finish(), timeout)
        run.answer = str(output)
        raw = getattr(output, "raw", None) or {}
        run.rounds = int(raw.get("rounds", 0))
        run.tasks = [
            {k: t.get(k) for k in ("id", "round", "tool", "args", "status", "output")}
            for t in raw.get("summary", {}).get("tasks", [])
        ]
    except TimeoutError:
        run.error = f"timed out after {timeout} s"
    except Exception as e:  # a failed run is a wrong answer, not the end of the eval
        run.error = f"{type(e).__name__}: {e}"
    run.seconds = round(time.perf_counter() - started, 2)
    return run


def task_line(task: dict[str, Any]) -> str:
    """A summary task as ``tool({args}) -> 'start of its output'``."""
    return f"{task['tool']}({task['args']}) -> {str(task.get('output'))[:60]!r}"


async def ask(workflow: LLMCompilerWorkflow, q: Question, timeout: float | None) -> AnswerOutcome:
    """Run one question to its answer, timing its first task, and check it."""
    run = await run_once(workflow, q.text, timeout)
    judged: Verdict = "wrong" if run.error else verdict(run.answer, q.expect)
    return AnswerOutcome(
        question=q.text,
        expect=list(q.expect),
        answer=run.answer,
        right=judged == "right",
        seconds=run.seconds,
        rounds=run.rounds,
        tasks=[task_line(t) for t in run.tasks],
        error=run.error,
        verdict=judged,
        first_task=run.first_task,
        kind=q.kind,
        tools=q.tools,
        held_out=q.held_out,
        batch=q.batch,
    )


async def run_answers(
    llm: LLM,
    questions: Sequence[Question] = QUESTIONS,
    timeout: float | None = None,
    joiners: Sequence[str] = ("text",),
    **options: Any,
) -> list[AnswerOutcome]:
    """Every question, one after another (the tools' parallelism is within a run).

    Each question is asked once per joiner format in `joiners`, one right after the
    other (so both meet the same machine load). `options` go to each tool set's
    :class:`LLMCompilerDialect`.
    """
    workflows = {
        (j, name): make(llm, joiner=j, **options)
        for j in joiners
        for name, make in (("demo", demo_workflow), ("stocks", stocks_workflow))
    }
    out = []
    for i, q in enumerate(questions, 1):
        for joiner in joiners:
            workflow = workflows[joiner, q.tools]
            # As a user who reads the answer, then asks again. Every workflow's warm-up:
            # the last answer may have come from another one, on the same model server.
            await asyncio.gather(*(w.warmed() for w in workflows.values()))
            outcome = await ask(workflow, q, timeout)
            outcome.joiner = joiner
            print(
                f"[{i}/{len(questions)} {joiner}] {outcome.verdict} {outcome.seconds:.1f} s "
                f"(first task {outcome.first_task} s): {q.text} -> {outcome.answer[:100]!r} "
                f"[{'; '.join(outcome.tasks)}]",
                file=sys.stderr,
            )
            out.append(outcome)
    return out


def _median(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.1f}" if known else "-"


def tally(outcomes: Sequence[AnswerOutcome]) -> str:
    """``right / could not find / wrong`` counts and median timings of `outcomes`."""
    counts = {
        v: sum(o.verdict == v for o in outcomes) for v in ("right", "could not find", "wrong")
    }
    return (
        f"| {counts['right']}/{len(outcomes)} | {counts['could not find']} | {counts['wrong']} "
        f"| {_median([o.first_task for o in outcomes])} "
        f"| {_median([o.seconds for o in outcomes])} |"
    )


def groups(outcomes: Sequence[AnswerOutcome]) -> list[tuple[str, list[AnswerOutcome]]]:
    """The outcomes by joiner, tuned / held out and tool set, then all of each joiner."""
    out = []
    joiners = list(dict.fromkeys(o.joiner for o in outcomes))
    for joiner in joiners:
        mine = [o for o in outcomes if o.joiner == joiner]
        tag = f"{joiner} joiner, " if len(joiners) > 1 else ""
        for held, batch, label in (
            (False, 1, "tuned"),
            (True, 1, "held out"),
            (True, 2, "held out 2"),
            (True, 3, "held out 3"),
            (True, 4, "held out 4"),
            (True, 5, "held out 5"),
        ):
            for tools in ("demo", "stocks"):
                group = [o for o in mine if (o.held_out, o.batch, o.tools) == (held, batch, tools)]
                if group:
                    out.append((f"{tag}{label}, {tools} tools", group))
        out.append((f"{tag}all", mine))
    return out


def markdown(outcomes: Sequence[AnswerOutcome], model: str, date: str) -> str:
    """Accuracy by group and one row per question."""
    right = sum(o.right for o in outcomes)
    lines = [
        f"Answer accuracy: **{right}/{len(outcomes)}** on {model}, {date}.",
        "",
        "| questions | right | could not find | wrong | median first task s | median answer s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [f"| {label} {tally(group)}" for label, group in groups(outcomes)]
    lines += [
        "",
        "| question | tools | kind | held out | joiner | expected | answer | verdict "
        "| first task s | answer s |",
        "|---|---|---|---|---|---|---|---|---:|---:|",
    ]
    for o in outcomes:
        answer = (o.error or o.answer).replace("|", "/").replace("\n", " ")[:160]
        expect = ", ".join(str(x) for x in o.expect) or "(not in the tools)"
        first = "-" if o.first_task is None else f"{o.first_task:.1f}"
        lines.append(
            f"| {o.question} | {o.tools} | {o.kind} | {'yes' if o.held_out else ''} | {o.joiner} "
            f"| {expect} "
            f"| {answer} | {o.verdict} | {first} | {o.seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


def in_set(q: Question, name: str) -> bool:
    """Whether `q` is in the set `name`: all, tuned, held-out (any batch), held-out-N
    (batch N), seen (tuned and the held-out batches 1-2, read before batch 3)."""
    if name in ("all", "held-out" if q.held_out else "tuned"):
        return True
    if name == "seen":
        return q.batch < 3
    return q.held_out and name == f"held-out-{q.batch}"


def select(args: argparse.Namespace) -> list[Question]:
    """The questions the command line asks for."""
    chosen = [
        q
        for q in QUESTIONS
        if in_set(q, args.set)
        and args.tools in ("all", q.tools)
        and (not args.match or args.match.lower() in q.text.lower())
    ]
    return chosen[: args.limit] if args.limit else chosen


def rejudge(path: Path) -> str:
    """Check the answers stored in `path` (a results ``.json``) again with this module's
    checker, rewrite it and its ``.md``, and return the table (no model runs)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    outcomes = []
    for raw in data["outcomes"]:
        o = AnswerOutcome(**raw)
        o.verdict = "wrong" if o.error else verdict(o.answer, o.expect)
        o.right = o.verdict == "right"
        outcomes.append(o)
    table = markdown(outcomes, data["model"], data["date"])
    meta = {k: v for k, v in data.items() if k != "outcomes"}
    write_results(path, table, {**meta, "right": sum(o.right for o in outcomes)}, outcomes)
    return table


async def main_async(args: argparse.Namespace) -> int:
    """Run the questions on the configured model, print and save the results."""
    from llm_compiler.models.resolve import resolve_llm

    if args.rejudge is not None:
        print(rejudge(args.rejudge))
        return 0

    resolved = resolve_llm()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    questions = select(args)
    options: dict[str, Any] = {} if args.shared_prefix else {"shared_prefix": False}
    async with resolved as llm:
        joiners = tuple(("text,json" if args.joiner == "both" else args.joiner).split(","))
        if args.examples:
            options["constrained_examples"] = args.examples
        outcomes = await run_answers(llm, questions, args.timeout, joiners, **options)
    table = markdown(outcomes, resolved.description, date)
    print(table)
    right = sum(o.right for o in outcomes)
    meta = {"model": resolved.description, "date": date, "right": right, "n": len(outcomes)}
    write_results(args.out, table, meta, outcomes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m evals.answers``."""
    p = argparse.ArgumentParser(prog="python -m evals.answers", description=__doc__)
    p.add_argument(
        "--set",
        choices=("all", "tuned", "seen", "held-out", *(f"held-out-{n}" for n in range(2, 6))),
        default="all",
    )
    p.add_argument("--tools", choices=("all", "demo", "stocks"), default="all")
    p.add_argument("--match", default="", help="only questions containing this text")
    p.add_argument("--limit", type=int, default=0, help="only the first N questions")
    p.add_argument(
        "--no-shared-prefix",
        dest="shared_prefix",
        action="store_false",
        help="joiner prompts without the planner's text first (to measure the first task)",
    )
    p.add_argument(
        "--joiner",
        default="select",
        help="the joiner's reply: select (an answer rendered from the results the model "
        "selects), text (grounded Thought/Action), json; several comma-separated are asked "
        "in turn (both: text,json)",
    )
    p.add_argument(
        "--examples",
        choices=("own", "mixed", "builtin", "varied"),
        default=None,
        help="the second tool set's few-shot plans (LLMCompilerDialect(constrained_examples=...))",
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "answers.json")
    p.add_argument(
        "--rejudge",
        type=Path,
        default=None,
        help="check the answers of this results .json again (and rewrite it); runs nothing",
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per question")
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
