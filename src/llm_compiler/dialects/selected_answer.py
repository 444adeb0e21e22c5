"""A joiner whose answer is written by the engine from what the model selects.

Small models garble answers around right observations ("Emma was written by Toni
Morrison", "1,834 m longer" where the calculation said 903). This joiner gives the model
no words to write: under constrained decoding its grammar is the answer itself, rendered
from the round's results, and the model only chooses, for each result that answers the
question, which sentence of its observation to quote. The rendered answer is
grounded by construction: every name and number in it is an observation's or a
computation's. ::

    Golden Gate Bridge (length m): 2737; Brooklyn Bridge (length m): 1834; 2737 - 1834 = 903.
    Emma: author Jane Austen; Beloved: author Toni Morrison.

Which results an answer shows (:func:`answer_parts`): the *final* results (a task no
successful task used) about something the question names (one of the call's text
arguments, or of the tasks it used, is in the question), each after the results it used
(a calculation after its operands). A text observation is split into sentences, of which
the answer quotes those that fit the question best (:func:`_ranked`): one is forced, and
among several the model picks one or two. A number is shown whole. When no result
answers, the answer is "I could not find" and what was looked for.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llm_compiler.dialects.base import JoinerDecision, LLMRequest
from llm_compiler.dialects.grammar import NOT_FOUND, gbnf_literal
from llm_compiler.dialects.grounding import (
    compute_tool,
    declared_values,
    named_tools,
    observation_texts,
)
from llm_compiler.dialects.plan_lines import parse_task_line
from llm_compiler.dialects.prompting import (
    PromptContext,
    RoundRecord,
    TaskRecord,
    declared_not_found,
    found_nothing,
    rejected,
)
from llm_compiler.dialects.question_parts import parallel_calls
from llm_compiler.plan import PlanTask
from llm_compiler.tools.spec import tool_specs

#: Most sentences an observation offers, most characters of one, and most a part quotes.
MAX_UNITS, MAX_UNIT_CHARS, MAX_PICKS = 8, 200, 2
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
#: ``Emma: Novel by ...``: an observation that starts with the name of its subject.
_TITLE = re.compile(r"([^:.;\n]{1,60}?):\s+(.+)", re.S)
#: A sentence end: ``. `` before a capital letter or a digit (``68.4`` is no end).
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
#: ``Author: Jane Austen`` -> ``author Jane Austen``.
_LABEL = re.compile(r"([A-Z][a-z]+(?: [a-z]+)?):\s+(.+)", re.S)


@dataclass(frozen=True)
class Part:
    """One result as the answer shows it: `label`, then one of `units` (or up to
    ``MAX_PICKS`` of them, ``; `` between)."""

    task_id: int
    label: str
    units: tuple[str, ...]

    @property
    def forced(self) -> bool:
        """Whether the part leaves nothing to choose."""
        return len(self.units) == 1


@dataclass(frozen=True)
class _Task:
    record: TaskRecord
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    deps: tuple[int, ...]
    plan: PlanTask


def _parse(record: TaskRecord, earlier: Sequence[int]) -> _Task:
    body = record.text.split(".", 1)[1] if re.match(r"\s*\d+\.", record.text) else record.text
    task = parse_task_line(record.id, body, earlier=earlier)
    return _Task(record, tuple(task.args), dict(task.kwargs), tuple(task.deps), task)


def _norm(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).lower()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def number_text(text: str) -> str:
    """A number as an answer writes it: ``4806.0`` -> ``4806``, ``107600000.0`` ->
    ``107,600,000``, ``48.30000000000001`` -> ``48.3`` (15 significant digits); other
    text unchanged."""
    text = text.strip()
    if not _NUMBER.fullmatch(text):
        return text
    value = float(f"{float(text):.15g}")
    if value.is_integer():
        return f"{int(value):,}" if abs(value) >= 10_000 else str(int(value))
    shown = repr(value)
    return text if "e" in shown else shown


def _strings(value: Any) -> list[str]:
    """The literal text arguments inside `value` (references and templates skipped)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _resolved(value: Any, results: dict[int, str]) -> Any:
    from llm_compiler.plan import resolve

    return resolve(value, results)


@dataclass(frozen=True)
class _Round:
    """A run's tasks as an answer reads them: every task, those that found something
    (`ok`), and the ones the answer shows."""

    tasks: dict[int, _Task]
    ok: dict[int, _Task]
    shown: tuple[int, ...]
    calculator: str | None


def _read(context: PromptContext) -> _Round:
    records = [t for r in context.rounds for t in r.tasks]
    ids = [t.id for t in records]
    tasks = {t.id: _parse(t, [i for i in ids if i < t.id]) for t in records}
    ok = {i: t for i, t in tasks.items() if not found_nothing(t.record) and t.record.observation}
    used = {d for t in ok.values() for d in t.deps}
    calculator = compute_tool(context.tools)
    read = _Round(tasks, ok, (), calculator)
    writable = _writable_names(context)
    finals = [i for i in ok if i not in used and _written(read, i, writable)]
    finals = _asked(context, read, finals)
    chosen = [i for i in finals if _about_question(context, read, i)] or finals
    shown: set[int] = set()
    for i in chosen:
        shown |= {i} | _ancestors(read, i)
    return _Round(tasks, ok, tuple(sorted(shown)), calculator)


def _ancestors(read: _Round, i: int) -> set[int]:
    """The tasks that found something whose results task `i` used, transitively."""
    seen: set[int] = set()
    todo = [i]
    while todo:
        task = read.tasks.get(todo.pop())
        for d in task.deps if task else ():
            if d in read.ok and d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def _literals(task: _Task) -> list[str]:
    """A call's literal text arguments (references and templates left out)."""
    texts = _strings(list(task.args)) + _strings(list(task.kwargs.values()))
    return [t for t in texts if not re.search(r"\$\d", t)]


def _about_question(context: PromptContext, read: _Round, i: int) -> bool:
    """Whether a result is about something the question names (a calculation always
    is: it was planned for the question, ``"36000 + 183000"``)."""
    if read.ok[i].record.tool == read.calculator:
        return True
    question = f" {_norm(context.question)} "
    for j in {i} | _ancestors(read, i):
        t = read.ok[j]
        texts = _literals(t)
        title = _TITLE.match(t.record.observation or "")
        texts += [title.group(1)] if title else []
        if any(_norm(s) and f" {_norm(s)} " in question for s in texts):
            return True
    return False


#: A capitalized word: a name, or part of one.
_CAPITALIZED = re.compile(r"(?<![\w-])[^\W\d_a-z][\w-]*")


def _writable_names(context: PromptContext) -> str:
    """The text a name in an answer's call may come from: the question, what the tools
    said (a suggestion in a failure's message too), and the values the tools declare;
    normalized, spaces around."""
    declared = [v for values in declared_values(context.tools).values() for v in values]
    for spec in tool_specs(context.tools):
        declared += [str(v) for p in spec.params for v in p.schema.get("enum", ())]
    texts = [context.question, *observation_texts(context.rounds, found=False), *declared]
    return f" {' '.join(_norm(t) for t in texts)} "


def _written(read: _Round, i: int, writable: str) -> bool:
    """Whether every name in the calls behind result `i` was written by the question,
    a finding or a tool's declared values: a name the question did not write is never
    shown as found (``stock (Dune, Downtown): 0`` for a branch nobody named)."""
    for j in {i} | _ancestors(read, i):
        for text in _literals(read.ok[j]):
            if any(f" {_norm(w)} " not in writable for w in _CAPITALIZED.findall(text)):
                return False
    return True


def _asked(context: PromptContext, read: _Round, finals: list[int]) -> list[int]:
    """The final results the question asks for: where its words name tools
    (:func:`~llm_compiler.dialects.grounding.named_tools`) and some results come from
    those, the others are values nobody asked for (a price beside the delivery time
    asked). A calculation stays."""
    named = set(named_tools(context.question, context.tools))

    def chain(i: int) -> set[str]:
        return {read.ok[j].record.tool for j in {i} | _ancestors(read, i)}

    if not named or not any(chain(i) & named for i in finals):
        return finals
    return [i for i in finals if chain(i) & named or read.ok[i].record.tool == read.calculator]


def answer_parts(context: PromptContext) -> list[Part]:
    """The results an answer to `context`'s question shows, in plan order (see the
    module docstring); empty when none answers it."""
    read = _read(context)
    results = {i: number_text(t.record.observation or "") for i, t in read.ok.items()}
    params = {spec.name: [p.name for p in spec.params] for spec in tool_specs(context.tools)}
    parts, seen = [], set()
    for i in read.shown:
        part = _ranked(_part(read.ok[i], results, read.calculator, params), context.question)
        key = (part.label, part.units)
        if key not in seen:
            seen.add(key)
            parts.append(part)
    shown_tasks = [read.ok[i] for i in read.shown]
    labels = _operand_labels(shown_tasks, parts)
    return [_labelled(p, labels) for p in parts] + _extremes(shown_tasks)


def _extremes(tasks: Sequence[_Task]) -> list[Part]:
    """How the numbers of one tool's calls compare (the things a "which" compares): for
    two, ``Golden Gate Bridge (2737) is 903 more than Brooklyn Bridge (1834)``; for
    more, ``highest: ...; lowest: ...``; each labelled by the arguments its call does
    not share with the others. Every number in it is a result shown before, or the
    difference of two."""
    out = []
    for found in _comparable(tasks):
        if len({v for v, _, _ in found}) < 2:
            continue
        high, low = max(found), min(found)
        if len(found) == 2:
            gap = number_text(f"{high[0] - low[0]:.10g}")
            text = f"{high[1]} ({high[2]}) is {gap} more than {low[1]} ({low[2]})"
        else:
            text = f"highest: {high[1]} ({high[2]}); lowest: {low[1]} ({low[2]})"
        out.append(Part(-1, "", (text,)))
    return out[:1]


def _comparable(tasks: Sequence[_Task]) -> list[list[tuple[float, str, str]]]:
    """The number results of one tool's calls with literal arguments, by tool: each as
    (value, the arguments its call does not share with the others, the number as
    shown); groups of two or more different calls only. A number is a result that is
    one number, or the one number of a text whose other characters are those of the
    group's other texts (``Length: 2,737 m`` beside ``Length: 1,834 m``)."""
    groups: dict[str, list[tuple[list[Any], tuple[float, str, str]]]] = {}
    for task in tasks:
        found = _one_number((task.record.observation or "").strip())
        if task.deps or found is None:
            continue
        values = [*task.args, *task.kwargs.values()]
        groups.setdefault(task.record.tool + "\0" + found[1], []).append((values, found))
    out = []
    for members in groups.values():
        calls = [values for values, _ in members]
        if len(members) < 2 or len({len(c) for c in calls}) > 1:
            continue
        differ = [k for k in range(len(calls[0])) if len({repr(c[k]) for c in calls}) > 1]
        labels = [", ".join(_show(c[k]) for k in differ) for c in calls]
        if differ and len(set(labels)) == len(labels):
            out.append([(f[0], label, f[2]) for (_, f), label in zip(members, labels, strict=True)])
    return out


_WRITTEN_NUMBER = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?")


def _one_number(text: str) -> tuple[float, str, str] | None:
    """(value, the text with the number left out, the number as shown) of a text that
    holds exactly one number; None else."""
    written = _WRITTEN_NUMBER.findall(text)
    if len(written) != 1 or len(text) > MAX_UNIT_CHARS:
        return None
    shown = number_text(written[0].replace(",", ""))
    template = "" if _NUMBER.fullmatch(text) else _WRITTEN_NUMBER.sub("#", text)
    return float(written[0].replace(",", "")), template, shown


#: ``1912 - 1954``: a calculation that subtracts one number from another.
_DIFFERENCE = re.compile(
    rf"\s*\(?\s*({_WRITTEN_NUMBER.pattern})\s*\)?\s*-\s*\(?\s*({_WRITTEN_NUMBER.pattern})\s*\)?\s*"
)


def _labelled(part: Part, labels: dict[float, str]) -> Part:
    """A negative difference as the calculator computed it, sign and order kept, each
    operand labelled by the call that returned it: ``1879 (Einstein) - 1885 (Bohr) =
    -6`` (which is the smaller). Other parts unchanged."""
    expression, _, value = part.units[0].rpartition(" = ")
    match = _DIFFERENCE.fullmatch(expression)
    if part.label or not match or not value.startswith("-"):
        return part
    first, second = match.group(1).replace(",", ""), match.group(2).replace(",", "")

    def shown(number: str) -> str:
        label = labels.get(float(number))
        return f"{number_text(number)} ({label})" if label else number_text(number)

    return Part(part.task_id, "", (f"{shown(first)} - {shown(second)} = {value}",))


def _operand_labels(tasks: Sequence[_Task], parts: Sequence[Part]) -> dict[float, str]:
    """By value, what returned each number result among `tasks`: the argument its call
    does not share with the other calls of its group (see :func:`_comparable`), else
    the label of its part."""
    labels: dict[float, str] = {}
    for group in _comparable(tasks):
        labels.update({v: name for v, name, _ in group})
    by_id = {p.task_id: p.label.rstrip(": ") for p in parts}
    for task in tasks:
        one = _one_number((task.record.observation or "").strip())
        if one and by_id.get(task.record.id):
            labels.setdefault(one[0], by_id[task.record.id])
    return labels


def _part(
    task: _Task, results: dict[int, str], calculator: str | None, params: dict[str, list[str]]
) -> Part:
    record = task.record
    observation = (record.observation or "").strip()
    value = number_text(observation)
    args = [_resolved(a, results) for a in task.args]
    kwargs = {k: _resolved(v, results) for k, v in task.kwargs.items()}
    if record.tool == calculator and len(args) + len(kwargs) == 1:
        expression = str((args or list(kwargs.values()))[0])
        return Part(record.id, "", (f"{expression} = {value}",))
    names = params.get(record.tool, [])
    written = {**dict(zip(names, task.args, strict=False)), **task.kwargs}
    named = {**dict(zip(names, args, strict=False)), **kwargs}
    label = _call_words(record.tool, written, named)
    if _NUMBER.fullmatch(observation) or task.deps:
        return Part(record.id, f"{label}: ", (value,))
    title = _TITLE.match(observation)
    if title:
        label, observation = title.group(1).strip(), title.group(2)
    return Part(record.id, f"{label}: ", tuple(units(observation)))


def _call_words(tool: str, written: dict[str, Any], named: dict[str, Any]) -> str:
    """A call in words: ``flight price (Lisbon)``, ``convert c to f (celsius 4)``,
    ``lookup (Brooklyn Bridge, length m)``: the tool's name, then each text argument as it
    was written and each other value (a number, a result) after its parameter's name."""
    shown = [
        v.replace("_", " ")
        if isinstance(written.get(k), str) and isinstance(v, str)
        else f"{k.replace('_', ' ')} {_show(v)}"
        for k, v in named.items()
    ]
    return _readable(tool) + (f" ({', '.join(shown)})" if shown else "")


def _ranked(part: Part, question: str) -> Part:
    """`part` with only the sentences that fit the question best: those that share
    most words of four letters or more with it (first five letters:
    ``authors``/``Author``); the shortest first. The model picks
    among them; a single best one is forced."""
    wanted = _stems(question) - _stems(part.label)  # not the subject's own words

    def score(unit: str) -> int:
        return len(wanted & _stems(unit))

    best = max(score(u) for u in part.units)
    tied = sorted((u for u in part.units if score(u) == best), key=lambda u: len(u.split()))
    return Part(part.task_id, part.label, tuple(tied))  # the shortest first


def _stems(text: str) -> set[str]:
    return {w[:5] for w in _norm(text).split() if len(w) > 3}


def _show(value: Any) -> str:
    return value if isinstance(value, str) else number_text(str(value))


def _readable(name: str) -> str:
    return " ".join(re.findall(r"[a-zA-Z]+|\d+", name)).lower() or name


def units(text: str) -> list[str]:
    """An observation's sentences as an answer quotes them (``Author: Jane Austen``
    as ``author Jane Austen``; no final period; at most ``MAX_UNITS``)."""
    out: list[str] = []
    for sentence in _SENTENCE.split(" ".join(text.split())):
        sentence = sentence.strip().rstrip(".").strip()[:MAX_UNIT_CHARS]
        if not sentence:
            continue
        label = _LABEL.fullmatch(sentence)
        if label:
            sentence = f"{label.group(1).lower()} {label.group(2)}"
        if sentence not in out:
            out.append(sentence)
    return out[:MAX_UNITS] or [text.strip()[:MAX_UNIT_CHARS]]


def _looked_for(context: PromptContext, only_named: bool = False) -> list[tuple[bool, str]]:
    """What the tasks that found nothing looked for, each as (declared, words):
    ``(True, '"Peru"')`` (its first text argument) where its tool said it found nothing;
    ``(False, 'get weather ("Berlin") failed (ConnectionError: HTTP 503)')`` where the
    tool failed or a human rejected the call. With `only_named`, only those about a span
    of the question that no task found something about."""
    records = [t for r in context.rounds for t in r.tasks]
    ids = [t.id for t in records]
    found: set[str] = set()
    looked: list[tuple[str, bool, str]] = []
    for record in records:
        if record.skipped:
            continue
        task = _parse(record, [i for i in ids if i < record.id])
        texts = _strings(list(task.args)) + _strings(list(task.kwargs.values()))
        first = next((t.strip() for t in texts if not re.search(r"\$\d", t)), "")
        if not found_nothing(record):
            title = _TITLE.match(record.observation or "")
            found |= {f" {_norm(first)} "} | ({f" {_norm(title.group(1))} "} if title else set())
        elif first or not declared_not_found(record):
            said = _failure(record, first)
            if said not in [s for _, _, s in looked]:
                looked.append((first, declared_not_found(record), said))
    if only_named:
        question = f" {_norm(context.question)} "
        looked = [
            (first, declared, said)
            for first, declared, said in looked
            if _norm(first)
            and f" {_norm(first)} " in question
            and not any(f" {_norm(first)} " in f or f in f" {_norm(first)} " for f in found)
        ]
    return [(declared, said) for _, declared, said in looked][:3]


def _failure(record: TaskRecord, first: str) -> str:
    """What a task that found nothing says: what it looked for, or that it failed."""
    if declared_not_found(record):
        return f'"{first}"'
    call = _readable(record.tool) + (f' ("{first}")' if first else "")
    if rejected(record):
        return f"{call} was rejected"
    error = (record.observation or "").removeprefix("Error:").strip()
    return f"{call} failed ({error[:120]})" if error else f"{call} failed"


def _said(looked: Sequence[tuple[bool, str]]) -> str:
    """``I could not find "Peru".`` and ``get weather ("Berlin") failed (...).``"""
    missing = [said for declared, said in looked if declared]
    failed = [said for declared, said in looked if not declared]
    out = [f"I {NOT_FOUND} " + " or ".join(missing) + "."] if missing else []
    return " ".join(out + [f"{said[:1].upper()}{said[1:]}." for said in failed])


def not_found_answer(context: PromptContext) -> str:
    """``I could not find X.``: X what the tasks looked for; and which tools failed."""
    return _said(_looked_for(context)) or f"I {NOT_FOUND} the answer."


def missing_note(context: PromptContext) -> str:
    """`` I could not find "Peru".`` for what the question names and no task found (or
    whose tool failed), and ``No result for delivery days (Emma).`` for what it asks of
    a tool the plan did not call, after an answer about the rest (empty if nothing is
    missing)."""
    notes = (_said(_looked_for(context, only_named=True)), _uncalled(context))
    said = " ".join(note for note in notes if note)
    return f" {said}" if said else ""


def _uncalled(context: PromptContext) -> str:
    """``No result for delivery days (Emma) or delivery days (Ulysses).``: the calls an
    answered tool lacks for names the question writes in the same place as one of its
    arguments (``for Dune, for Emma and for Ulysses``, read by
    :func:`~llm_compiler.dialects.question_parts.parallel_calls`), unless another call took
    that name for another parameter (``EUR`` as a currency is no city)."""
    read = _read(context)
    params = {spec.name: [p.name for p in spec.params] for spec in tool_specs(context.tools)}
    taken = [_named_args(t, params) for t in read.tasks.values()]
    missing: list[str] = []
    for tool in dict.fromkeys(read.ok[i].record.tool for i in read.shown):
        if tool == read.calculator:
            continue
        own = [t.plan for t in read.tasks.values() if t.record.tool == tool]
        for task in _same_place(context.question, tool, own):
            written = _named_args(task, params)
            if not _taken_otherwise(written, taken):
                missing.append(_call_words(tool, written, written))
    return f"No result for {' or '.join(missing)}." if missing else ""


def _same_place(question: str, tool: str, calls: list[PlanTask]) -> list[_Task]:
    """The calls of `tool` that :func:`parallel_calls` finds missing, and those it finds
    from them in turn (``Ulysses`` from ``Dune`` in ``for Dune, for Emma and for
    Ulysses``, then ``Emma`` from ``Ulysses``), in the question's order."""
    found: list[_Task] = []
    while len(found) < MAX_PICKS * MAX_UNITS:
        more = parallel_calls(question, [*calls, *(t.plan for t in found)])
        if not more:
            break
        found += [_parse(TaskRecord(0, tool, call), ()) for call in more]

    def where(task: _Task) -> int:
        return min((question.find(t) % (len(question) + 1) for t in _literals(task)), default=0)

    return sorted(found, key=where)


def _taken_otherwise(call: dict[str, Any], taken: Sequence[dict[str, Any]]) -> bool:
    """Whether a text argument of `call` is one another call took for another
    parameter."""
    texts = {(k, _norm(v)) for k, v in call.items() if isinstance(v, str)}
    others = {(k, _norm(v)) for args in taken for k, v in args.items() if isinstance(v, str)}
    return any(v == w and k != j for k, v in texts for j, w in others)


def _named_args(task: _Task, params: dict[str, list[str]]) -> dict[str, Any]:
    """A call's arguments by parameter name."""
    names = params.get(task.record.tool, [])
    return {**dict(zip(names, task.args, strict=False)), **task.kwargs}


def render(parts: Sequence[Part], picks: Sequence[Sequence[str]] | None = None) -> str:
    """The answer: each part's label and its picked units (default: the first); a
    part with a choice as ``author Jane Austen (Emma)``: the model picks right after the
    question, not after the name, which its observation follows with its first
    sentence."""
    shown = []
    for n, part in enumerate(parts):
        chosen = picks[n] if picks is not None else part.units[:1]
        if part.forced:
            shown.append(part.label + "; ".join(chosen))
        else:
            shown.append("; ".join(chosen) + f" ({part.label.rstrip(': ')})")
    return "; ".join(shown) + "."


def selected_answer(context: PromptContext) -> str | None:
    """The answer when it leaves nothing to choose (every part forced, or nothing
    found), else None: the model picks (see :func:`answer_grammar`)."""
    parts = answer_parts(context)
    if not parts:
        return not_found_answer(context)
    return render(parts) + missing_note(context) if all(p.forced for p in parts) else None


def answer_grammar(context: PromptContext) -> str:
    """GBNF of the rendered answer: fixed text but for each part's sentence(s)."""
    parts = answer_parts(context)
    if not parts:
        return f"root ::= {gbnf_literal(' ' + not_found_answer(context))}\n"
    rules, sequence = [], []
    for n, part in enumerate(parts):
        label = gbnf_literal(part.label) if part.label else ""
        if part.forced:
            sequence.append(f"{label} {gbnf_literal(part.units[0])}".strip())
            continue
        rules.append(f"unit{n} ::= " + " | ".join(gbnf_literal(u) for u in part.units))
        more = f'("; " unit{n}){{0,{MAX_PICKS - 1}}}' if MAX_PICKS > 1 else ""
        name = gbnf_literal(f" ({part.label.rstrip(': ')})")
        sequence.append(f"unit{n} {more} {name}".replace("  ", " "))
    body = ' "; " '.join(f"({s})" for s in sequence)
    end = gbnf_literal("." + missing_note(context))
    return "\n".join([f'root ::= " " {body} {end}', *rules]) + "\n"


SELECT_INSTRUCTIONS = """\
Answer a question from the results of a plan that was executed for it. The answer \
quotes, for each result it shows, the sentence of the observation that answers the \
question, copied exactly.
"""


def select_examples(examples: str, tools: Sequence[Any] = ()) -> str:
    """Thought/Action joiner examples as this joiner answers them: each ``Finish``
    example's rendered answer, quoting the sentences that share a word or number with
    its answer; ``Replan`` examples are left out."""
    from llm_compiler.dialects.thought_action import END_OF_RESPONSE, example_replies

    out = []
    for head, decision in example_replies(examples):
        if decision.action != "finish":
            continue
        record = _record(head)
        if record is None:
            continue
        question = head.strip().splitlines()[0].removeprefix("Question:").strip()
        context = PromptContext(question=question, rounds=[record], tools=tools)
        parts = answer_parts(context)
        if not parts:
            continue
        said = _stems(decision.content)
        picks = [[u for u in p.units if said & _stems(u)][:1] or p.units[:1] for p in parts]
        out.append(f"{head.strip()}\nAnswer: {render(parts, picks)}\n{END_OF_RESPONSE}\n")
    return "".join(out)


@dataclass(frozen=True)
class SelectJoinerInput:
    """The selecting joiner's prompt for one round (its examples: see
    :func:`select_examples`); the prompt ends with ``Answer:``, where the grammar
    writes the rendered answer."""

    context: PromptContext
    examples: str | None = None
    prefix: str = ""

    def system(self) -> str:
        """The instructions and the examples."""
        from llm_compiler.dialects import prompting
        from llm_compiler.dialects.thought_action import JOINER_EXAMPLES

        ctx = self.context
        text = self.prefix + "\n" if self.prefix else prompting.preamble(ctx.system_prompt)
        text += SELECT_INSTRUCTIONS
        raw = JOINER_EXAMPLES if self.examples is None else self.examples
        examples = select_examples(raw, ctx.tools)
        return text + ("\n" + examples.rstrip() + "\n" if examples else "")

    def request(self) -> str:
        """The question, the rounds, then the question again (as the text joiner)."""
        return self.context.joiner_request()

    def llm_request(self) -> LLMRequest:
        """A completion prompt ending with ``Answer:`` and the answer's grammar."""
        from llm_compiler.dialects import prompting
        from llm_compiler.dialects.thought_action import JOIN_STOP

        ctx = self.context
        prompt = prompting.completion_prompt(self.system(), ctx.history, self.request())
        return LLMRequest(
            prompt=prompt + "Answer:", stop=JOIN_STOP, extras={"grammar": answer_grammar(ctx)}
        )


def parse_selected(text: str) -> JoinerDecision:
    """The rendered answer as a decision to finish (a Thought/Action reply, from a
    model without the grammar, is read as such)."""
    from llm_compiler.dialects.thought_action import parse_joiner_output

    if re.search(r"(?i)\b(?:action|thought)\s*:", text):
        return parse_joiner_output(text)
    answer = text.strip().removeprefix("Answer:").strip()
    return JoinerDecision("finish", answer)


def _record(head: str) -> RoundRecord | None:
    """The tasks and observations of an example's text."""
    tasks: list[TaskRecord] = []
    for line in head.strip().splitlines()[1:]:
        m = re.match(r"(\d+)\.\s*(\w+)\(", line)
        if m:
            tasks.append(TaskRecord(int(m.group(1)), m.group(2), line.strip()))
        elif line.startswith("Observation:") and tasks:
            last = tasks[-1]
            tasks[-1] = TaskRecord(last.id, last.tool, last.text, line[12:].strip())
    return RoundRecord(tasks=tasks) if tasks else None
