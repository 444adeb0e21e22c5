"""What a plan or an answer may take from the question and the observations.

Small models retype names they could copy (``search("Dauphin")`` for the Danube) and
write numbers no observation holds. Under constrained decoding the grammars use what
this module finds: the names in the question and in earlier observations (a plan's
string argument that starts like a name must start with one of them), and the numbers
of the question, the observations and computations (the only digits an answer may
write). It also tells which tasks found nothing, so a round of failed lookups is
planned again instead of answered.

For questions that compare, it reads the question's words (``born`` also as
``birth``): the things compared are read by the field those words name, a tool of
texts may be called when only its description has them ("employees"), and a
calculation after texts writes the numbers those words stand next to in them.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from llm_compiler.dialects.plan_lines import parse_task_line
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.tools.spec import tool_specs

#: Lower-case words that may join capitalized words into one name (Statue of Liberty).
_JOINERS = "of|the|de|la|le|du|da|del|della|von|van|y|al|el|bin"
_CAP = r"[A-Z][\w'\u2019-]*"
_NAME = re.compile(rf"\b{_CAP}(?:[ \t]+(?:(?:{_JOINERS})[ \t]+)?{_CAP})*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: An observation that says it found nothing (a tool may return this instead of raising).
_NOT_FOUND = re.compile(
    r"\b(?:no (?:entry|entries|results?|matches?|match|data|record|information) (?:for|about|on)"
    r"|no \w+ (?:named|called)|not found|could not find|couldn't find"
    r"|unknown (?:city|name|symbol|entry|item|company)"
    r"|does not exist|no such)\b",
    re.I,
)
#: Capitalized words that name nothing: sentence starts and labels of observations.
_COMMON = frozenset(
    """the a an it its this that these those in on at of and or but for to from with by he
    she they his her their we you i is was are were be no yes not try there here which what
    who when where how why born died capital population area country city river mountain
    planet length height answer note""".split()
)
#: A question that compares or combines quantities (its plan computes).
_COMPARES = re.compile(
    r"\bhow (?:much|many)(?: \w+)? (?:more|less|fewer|higher|lower|longer|shorter|taller|older"
    r"|younger|bigger|larger|smaller|further|farther|heavier|lighter|deeper|after|before)\b"
    r"|\bby how (?:much|many)\b|\bdifferences?\b|\bcombined\b|\btotal\b|\bsum\b"
    r"|\btogether\b|\baltogether\b|\bratio\b|\bhow old was\b|\btimes (?:as|more)\b",
    re.I,
)
#: A question whose answer is a quantity: the answer states a number found.
_QUANTITY = re.compile(
    r"\bhow (?:much|many|long|tall|high|old|far|big|large|heavy|deep)\b|\bwhen\b|\byear"
    r"|\bpopulations?\b|\bprices?\b|\bcosts?\b|\barea\b|\blength\b|\bheight\b"
    r"|\bdistance\b|\bnumber of\b|\bcompare|\bcombined\b|\btotal\b",
    re.I,
)
#: Words of a tool's name or first parameter that make it a calculator.
_COMPUTE_WORDS = ("calc", "math", "arithmetic", "expr", "formula", "equation")
MAX_NAMES = 80
#: Most words of one name (``United States of America`` has 4): a longer run of
#: capitalized words gives its parts of this length, so reading a run stays linear in it.
MAX_NAME_WORDS = 8
MAX_NUMBERS = 120


def names(texts: Iterable[str], limit: int = MAX_NAMES) -> list[str]:
    """Capitalized names in `texts`, longest first, with their shorter parts.

    ``"How much higher is Mount Everest than K2?"`` gives ``Mount Everest``, ``Mount``,
    ``Everest``, ``How`` and ``K2``: every run of capitalized words (``of``/``de``...
    may join them) and every part of a run that starts and ends with a capitalized
    word, of :data:`MAX_NAME_WORDS` words at most.
    """
    found: dict[str, None] = {}
    for text in texts:
        for match in _NAME.finditer(text):
            words = match.group().split()
            for i in range(len(words)):
                for j in range(min(len(words), i + MAX_NAME_WORDS), i, -1):
                    part = words[i:j]
                    if part[0][0].isupper() and part[-1][0].isupper():
                        found[" ".join(part)] = None
    ordered = sorted(found, key=lambda n: (-len(n.split()), -len(n)))
    return ordered[:limit]


def answer_names(texts: Iterable[str], limit: int = MAX_NAMES) -> list[str]:
    """The names in `texts` that name something (no sentence starts or labels)."""
    return [n for n in names(texts, limit) if n.lower() not in _COMMON]


def number_forms(texts: Iterable[str], limit: int = MAX_NUMBERS) -> list[str]:
    """The numbers in `texts` as an answer may write them.

    Each as written, and for ``4806.0`` also ``4806`` and ``4,806``; a fraction also
    rounded to two and one decimals (``0.43``); ``38000000`` also ``38`` (for
    "38 million"). Signs are text: ``-238`` is ``-`` and ``238``.
    """
    forms: dict[str, None] = {}
    for text in texts:
        for raw in _NUMBER.findall(text):
            forms[raw] = None
            for form in _variants(raw):
                forms[form] = None
    return list(forms)[:limit]


def _variants(raw: str) -> list[str]:
    plain = raw.replace(",", "") if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", raw) else raw
    try:
        value = float(plain)
    except ValueError:
        return []
    out = []
    if value.is_integer():
        out += [str(int(value)), f"{int(value):,}"]
    else:
        for digits in (2, 1, 0) if value >= 10 else (2, 1):
            out.append(f"{value:.{digits}f}")
            out.append(f"{value:,.{digits}f}")
    for scale in (1e9, 1e6):
        if value >= scale:
            out += [f"{value / scale:g}", f"{value / scale:.1f}"]
            break
    return out


def found_nothing(task: TaskRecord) -> bool:
    """Whether a task failed, was skipped, or its observation says nothing was found."""
    if task.is_error or task.skipped:
        return True
    text = task.observation or ""
    return len(text) < 300 and bool(_NOT_FOUND.search(text))


def failed_tasks(record: RoundRecord) -> list[TaskRecord]:
    """The round's tasks that found nothing (see :func:`found_nothing`), but for those
    about a name another task found something about (a failed ``lookup("Ada
    Lovelace", "age")`` beside a ``search("Ada Lovelace")`` that found her) and those
    skipped because a task before them failed (that one is listed)."""
    found = {_subject(t) for t in record.tasks if not found_nothing(t)}
    return [
        t for t in record.tasks if found_nothing(t) and not t.skipped and _subject(t) not in found
    ]


_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"|\'((?:[^\'\\]|\\.)*)\'')


def _subject(task: TaskRecord) -> str:
    """What a task is about: its first string argument (lower case), or its line."""
    match = _STRING.search(task.text)
    return (match.group(1) or match.group(2) or "" if match else task.text).strip().lower()


def failed_calls(context: PromptContext, tools: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The calls of earlier rounds that found nothing, by tool: each one's required
    arguments' values in order (for a replan's grammar, which may not write them again).

    Calls with a reference or a template among those values are left out (the same
    text may name other results in a new round), and so are skipped ones and calls of
    one argument: ``search("Peru")`` excluded left the 270M model only text no name
    starts, and it wrote a query of 500 zeros.
    """
    out: dict[str, list[tuple[Any, ...]]] = {}
    for spec, values, _ in _literal_calls(context, tools):
        out.setdefault(spec.name, [])
        if values not in out[spec.name]:
            out[spec.name].append(values)
    return out


def suggested_values(
    context: PromptContext, tools: Sequence[Any]
) -> dict[str, dict[tuple[Any, ...], list[Any]]]:
    """Values a replan's call may take for a failed call's last required argument, when
    that argument is an enum and the failure names some of its other values: by tool,
    by the call's other required values. ``lookup("Leonardo da Vinci", "height_m")``
    failed with "has no field 'height_m'; known fields: birth_year, death_year": a
    replan's ``lookup("Leonardo da Vinci", ...)`` takes ``birth_year`` or
    ``death_year`` (the 270M model, told so only in words, tried ``length_km``).
    Of those, the ones a word of the question names, if any (``area_km2`` for "the
    combined area", where the error named ``population`` too).
    """
    out: dict[str, dict[tuple[Any, ...], list[Any]]] = {}
    failed = _literal_calls(context, tools)
    tried = {(spec.name, values[:-1], values[-1]) for spec, values, _ in failed}
    for spec, values, record in failed:
        last = [p for p in spec.params if p.required][-1]
        enum = last.schema.get("enum")
        if not isinstance(enum, list):
            continue
        said = record.observation or ""
        named = [
            x
            for x in enum
            if isinstance(x, str)
            and (spec.name, values[:-1], x) not in tried
            and re.search(rf"\b{re.escape(x)}\b", said)
        ]
        if named:
            allowed = out.setdefault(spec.name, {}).setdefault(values[:-1], [])
            allowed += [x for x in named if x not in allowed]
    asked = _words(context.question)
    for by_values in out.values():  # of those, the ones the question's words name
        for key, allowed in by_values.items():
            by_values[key] = [x for x in allowed if asked & _words(x)] or allowed
    return out


def found_calls(context: PromptContext, tools: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """For a replan that must plan for a name the first round left out
    (:func:`uncovered_names`), the calls that found something, by tool, as
    :func:`failed_calls` lists failed ones: their results are known, and the 270M model
    otherwise writes ``company_profile("Microsoft")`` again for "... than Apple"."""
    if not uncovered_names(context):
        return {}
    out: dict[str, list[tuple[Any, ...]]] = {}
    for spec, values, _ in _literal_calls(context, tools, failed=False, least=1):
        if values not in out.setdefault(spec.name, []):
            out[spec.name].append(values)
    return out


def _literal_calls(
    context: PromptContext, tools: Sequence[Any], *, failed: bool = True, least: int = 2
) -> list[tuple[Any, tuple[Any, ...], TaskRecord]]:
    """Each call that found nothing (with `failed`; else each that found something)
    whose required values, `least` or more, are all literals (see
    :func:`failed_calls`): its tool's spec, those values in order, and its record."""
    specs = {spec.name: spec for spec in tool_specs(tools)}
    out = []
    records = [t for r in context.rounds for t in r.tasks]
    for record in records:
        spec = specs.get(record.tool)
        if spec is None or record.skipped or found_nothing(record) != failed:
            continue
        body = re.sub(r"^\s*\d+\.\s*", "", record.text)
        task = parse_task_line(record.id, body, earlier=[t.id for t in records])
        if task.error or task.deps:
            continue
        required = [p for p in spec.params if p.required]
        named = {**dict(zip([p.name for p in spec.params], task.args, strict=False)), **task.kwargs}
        if not required or any(p.name not in named for p in required):
            continue
        values = tuple(named[p.name] for p in required)
        if len(values) >= least and all(isinstance(v, str | int | float | bool) for v in values):
            out.append((spec, values, record))
    return out


def expression_numbers(context: PromptContext) -> list[str]:
    """The numbers a plan's calculation may write: the question's and those earlier
    rounds found (as written, plain: ``4806.0``, ``4806``). Of a text that found
    something, only the numbers a word of the question stands next to, if it has some
    (``36,000`` of "founded 1993; 36,000 employees" for "how many employees").
    """
    asked = question_words(context.question)
    texts = [context.question]
    for text in observation_texts(context.rounds):
        named = _named_numbers(text, asked)
        texts += [" ".join(named)] if named else [text]
    return [n for n in number_forms(texts) if "," not in n]


#: A number as texts write it, with a scale word (``1.41 billion``), and what parts a text.
_NUMBER_WORDS = re.compile(_NUMBER.pattern + r"(?:\s+(?:thousand|million|billion))?")
_CLAUSE = re.compile(r"[;.!?()\n]\s|[;()\n]")
#: Words on each side of a number that say what it counts.
_NEAR = 3


def _named_numbers(text: str, asked: set[str]) -> list[str]:
    """The numbers of `text` with a word of `asked` among the three words on either
    side of it, in its clause; scaled (``1.41 billion``: ``1410000000``)."""
    if not asked:
        return []
    out = []
    for clause in _CLAUSE.split(text):
        for match in _NUMBER_WORDS.finditer(clause):
            before = re.findall(r"[A-Za-z]{3,}", clause[: match.start()])[-_NEAR:]
            after = re.findall(r"[A-Za-z]{3,}", clause[match.end() :])[:_NEAR]
            if _words(" ".join(before + after)) & asked:
                out.append(_plain_number(match.group()))
    return out


def _plain_number(written: str) -> str:
    """``36,000``: ``36000``; ``1.41 billion``: ``1410000000``."""
    number, _, scale = written.partition(" ")
    value = float(number.replace(",", "")) * {"thousand": 1e3, "million": 1e6, "billion": 1e9}.get(
        scale.strip(), 1.0
    )
    return str(int(value)) if value.is_integer() else repr(value)


def operands_found(context: PromptContext) -> bool:
    """Whether earlier rounds found a number for every name of a comparing question: a
    result that is a number, or a text with a number a word of the question stands
    next to, of a call or a text that names it. A replan then computes first."""
    names = question_names(context.question)
    if not names or not compares(context.question):
        return False
    asked = question_words(context.question)
    found = [
        (_plain(t.text + " " + (t.observation or "")), t.observation or "")
        for r in context.rounds
        for t in r.tasks
        if t.observation is not None and not found_nothing(t)
    ]
    return all(
        any(
            f" {_plain(name)} " in f" {about} "
            and (_is_number(text) or _named_numbers(text, asked))
            for about, text in found
        )
        for name in names
    )


def operands(context: PromptContext) -> tuple[list[str], int]:
    """What a replan's calculation computes on once every operand was found
    (:func:`operands_found`): references to results that are numbers and the numbers
    texts hold next to a word of the question, and how many it takes (one per name of
    the question, two at least). ``(["36000", "183000"], 2)`` for "how many employees
    do NVIDIA and Alphabet have together" after two profiles. Nothing to take: ``([], 0)``."""
    if not operands_found(context):
        return [], 0
    asked = question_words(context.question)
    out: dict[str, None] = {}
    for r in context.rounds:
        for t in r.tasks:
            text = t.observation
            if text is None or found_nothing(t):
                continue
            if _is_number(text):
                out[f"${t.id}"] = None
            else:
                out.update(dict.fromkeys(_named_numbers(text, asked)))
    count = max(2, len(question_names(context.question)))
    return (list(out), count) if len(out) >= count else ([], 0)


def text_result_ids(context: PromptContext) -> set[int]:
    """Earlier rounds' tasks whose results are texts, not numbers: a calculation cannot
    name them (``calculator("$1 + $2")`` of two profiles fails; it writes the numbers
    they hold, :func:`expression_numbers`)."""
    return {
        t.id
        for r in context.rounds
        for t in r.tasks
        if t.observation is not None and not found_nothing(t) and not _is_number(t.observation)
    }


def _is_number(text: str) -> bool:
    try:
        float(text.strip())
    except ValueError:
        return False
    return True


def unusable_ids(context: PromptContext) -> set[int]:
    """Earlier rounds' tasks that found nothing: a replan's ``$N`` cannot name them (a
    copied ``calculator("$1 - $2")`` would be skipped again for its failed input)."""
    return {t.id for r in context.rounds for t in r.tasks if found_nothing(t)}


def replan_reason(failed: Sequence[TaskRecord]) -> str:
    """Why to plan again after lookups that found nothing: each call and what it got."""
    shown = "; ".join(
        f"{t.text.strip()} gave {(t.observation or 'no result')[:160]!r}" for t in failed
    )
    return (
        f"Nothing was found by: {shown}. Plan these lookups again, differently: with "
        "names copied exactly from the question (or other names for the same thing), "
        "and the fields or values the errors say exist."
    )


def question_names(question: str) -> list[str]:
    """The names a question writes, each whole: runs of capitalized words (``Leonardo
    da Vinci``, ``CEO of NVIDIA``) without sentence starts and labels at their ends
    (``How``, ``What``)."""
    out: dict[str, None] = {}  # ordered, and each seen in O(1): linear in the question

    def label(word: str) -> bool:
        return word.lower() in _COMMON or not word[0].isupper()

    for match in _NAME.finditer(question):
        words = match.group().split()
        start, end = 0, len(words)
        while start < end and label(words[start]):
            start += 1
        while end > start and label(words[end - 1]):
            end -= 1
        if start < end:
            out.setdefault(" ".join(words[start:end]))
    return list(out)


def _is_code(name: str) -> bool:
    """A code (``NVDA``, ``K2``): no lower-case letter; else a name of words."""
    return not any(c.islower() for c in name)


def uncovered_names(context: PromptContext) -> list[str]:
    """Names of the question that no call of `context`'s rounds took, when a call took
    another name of the same shape (a word, or a code such as ``NVDA``): a plan that
    looked up ``Microsoft`` and not ``Apple`` for "How many more employees does
    Microsoft have than Apple?". A name is taken when a call's text argument holds it
    or is held by it (``"Wayne Enterprises"`` for ``CEO of Wayne Enterprises``). Names
    of another shape than every taken one are not listed (``Swiss`` of "in Swiss
    francs" beside ``stock_price("NVDA")``): those may be words, not things to look up.
    """
    taken = [
        f" {_plain(v)} "
        for r in context.rounds
        for t in r.tasks
        for v in _string_args(t.text)
        if _plain(v) and "$" not in v
    ]

    def covered(name: str) -> bool:
        padded = f" {_plain(name)} "
        return any(a in padded or padded in a for a in taken)

    found = question_names(context.question)
    shapes = {_is_code(n) for n in found if covered(n)}
    return [n for n in found if not covered(n) and _is_code(n) in shapes]


def _plain(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())


def _string_args(line: str) -> list[str]:
    """The quoted strings of a plan line (its text arguments)."""
    return [m.group(1) or m.group(2) or "" for m in _STRING.finditer(line)]


def uncovered_reason(missing: Sequence[str]) -> str:
    """Why to plan again a round that left names of the question out."""
    shown = ", ".join(f'"{n}"' for n in missing)
    return (
        f"The question names {shown}, which no action above used. Plan the actions the "
        "question needs about it, with the name copied exactly from the question."
    )


def observation_texts(rounds: Sequence[RoundRecord], *, found: bool = True) -> list[str]:
    """The observations of `rounds`: those that found something (or every one)."""
    return [
        t.observation
        for r in rounds
        for t in r.tasks
        if t.observation is not None and (not found or not found_nothing(t))
    ]


#: A code a tool's description lists as a value it takes (``EUR``, ``NVDA``, ``ISO-8601``).
_CODE = re.compile(r"\b[A-Z][A-Z0-9]{1,7}(?:-[A-Z0-9]+)?\b")


def plan_names(context: PromptContext, tools: Sequence[Any] = ()) -> list[str]:
    """Names a plan may copy: from the question, earlier rounds' findings and, of the
    tools' descriptions, the codes they list (``EUR`` of "another currency (EUR,
    JPY)"), which a question may name otherwise ("in euros")."""
    codes = [c for t in tools for c in _CODE.findall(_description(t))]
    found = names([context.question, *observation_texts(context.rounds)])
    return found + [c for c in dict.fromkeys(codes) if c not in found][: MAX_NAMES // 4]


def _description(tool: Any) -> str:
    metadata = getattr(tool, "metadata", None)
    text = getattr(metadata, "description", None) or getattr(tool, "__doc__", None)
    return text if isinstance(text, str) else ""


def answer_values(context: PromptContext) -> tuple[list[str], list[str]]:
    """(numbers the answer may write, values one of which it must state).

    Numbers come from the question and the observations that found something; the
    values it must state (one at least, or say it could not find) are those
    observations' numbers (only those, when the question asks for a quantity and some
    were found; only the calculator's, when it compares and one was computed) and names.
    """
    found = observation_texts(context.rounds)
    numbers = number_forms([context.question, *found])
    computed = _computed(context)
    if computed and compares(context.question):
        return numbers, computed  # a comparison's answer quotes the calculation
    found_numbers = number_forms(found)
    if found_numbers and _QUANTITY.search(context.question):
        return numbers, found_numbers
    return numbers, found_numbers + answer_names(found)


def _computed(context: PromptContext) -> list[str]:
    """The number forms of the calculator's results in `context`'s rounds."""
    tool = compute_tool(context.tools)
    results = [
        t.observation or ""
        for r in context.rounds
        for t in r.tasks
        if t.tool == tool and not found_nothing(t)
    ]
    return number_forms(results)


#: A question that adds quantities up, and one that takes their difference.
_SUMS = re.compile(r"\b(?:combined|total|sum|together|altogether|in all)\b", re.I)
_DIFFERS = re.compile(
    r"\bhow (?:much|many)(?: \w+)? (?:more|less|fewer|higher|lower|longer|shorter|taller|older"
    r"|younger|bigger|larger|smaller|further|farther|heavier|lighter|deeper|after|before)\b"
    r"|\bby how (?:much|many)\b|\bdifferences?\b|\bhow old was\b",
    re.I,
)


def excluded_operators(question: str) -> str:
    """Operators a calculation for `question` does not use: ``-`` when it only adds up
    (a total, combined), ``+`` when it only takes a difference (how much longer)."""
    sums, differs = bool(_SUMS.search(question)), bool(_DIFFERS.search(question))
    if sums == differs:
        return ""
    return "-" if sums else "+"


def asks_quantity(question: str) -> bool:
    """Whether a question's answer is a quantity (how tall, when, population ...)."""
    return bool(_QUANTITY.search(question))


def compares(question: str) -> bool:
    """Whether a question compares or combines quantities (how much longer, total ...)."""
    return bool(_COMPARES.search(question))


def compute_tool(tools: Sequence[Any]) -> str | None:
    """The name of the tool that computes expressions (a calculator), if there is one.

    One that takes one required string, an expression, and calls itself or it so
    (``calculator(expression)``, ``math(expr)``): ``geometry.calculate_area(base,
    height)`` computes, but not the comparisons of any question.
    """
    for spec in tool_specs(tools):
        required = [p for p in spec.params if p.required]
        if not spec.call_form or len(required) != 1:
            continue
        words = f"{spec.name} {required[0].name}".lower()
        if required[0].schema.get("type") == "string" and any(w in words for w in _COMPUTE_WORDS):
            return spec.name
    return None


def later_tools(tools: Sequence[Any], question: str = "") -> list[str]:
    """Tools a plan that computes calls only after the calculator, when some tool (not
    the calculator) declares a number: those declared to return text (a calculator
    cannot read a text), and, when `question`'s words are in the descriptions of some
    tools, the tools of the other kind and the unnamed ones of the same kind.

    Named tools of numbers come first ("how much more does a share cost": the share
    price, not a currency conversion copied from an example). Named tools of texts
    only when no tool of numbers is named ("how many employees": a profile of
    "founding year and employees" beside a share price; a calculation then writes the
    numbers the texts hold, see :func:`expression_numbers`).
    """
    specs = tool_specs(tools)
    kinds = {spec.name: _returns(tool) for tool, spec in zip(tools, specs, strict=True)}
    calculator = compute_tool(tools)
    others = [s.name for s in specs if s.name != calculator]
    numbers = [n for n in others if kinds[n] in (int, float)]
    if not numbers:
        return []
    texts = [n for n in others if kinds[n] is str]
    asked = question_words(question)
    named = [
        spec.name
        for tool, spec in zip(tools, specs, strict=True)
        if spec.name in others and _words(_description(tool)) & asked
    ]
    for kind in (numbers, texts):
        if chosen := [n for n in named if n in kind]:
            return [n for n in others if n not in chosen]
    return texts


#: Words a question asks with that name no field or thing (``how much more``).
_STOP = frozenset(
    """about above after again also among and any are before below between both but can
    could did does each either few for from had has have how into its just many more most
    much not now one only other over same several some such than that the their them then
    there these they this those through together too two under very was were what when
    where which while who whom whose why will with would you your combined total sum
    altogether difference less fewer further""".split()
)
#: Nouns of words a question asks with (``born``: ``birth``): fields are named by nouns.
_NOUNS = {
    "born": "birth", "died": "death", "die": "death", "dead": "death", "dies": "death",
    "high": "height", "higher": "height", "tall": "height", "taller": "height",
    "long": "length", "longer": "length", "wide": "width", "wider": "width",
    "deep": "depth", "deeper": "depth", "heavy": "weight", "heavier": "weight",
    "old": "age", "older": "age", "far": "distance", "farther": "distance",
    "big": "size", "bigger": "size", "large": "size", "larger": "size",
    "founded": "founding", "populous": "population", "cost": "price", "costs": "price",
}  # fmt: skip


def _stem(word: str) -> str:
    """A word without a plural ``s`` (``employees``: ``employee``; not ``this``)."""
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def _words(text: str) -> set[str]:
    """The words of `text` (lower case, three letters or more, plurals as singulars)."""
    return {_stem(w) for w in re.findall(r"[a-z]{3,}", text.lower())}


def question_words(question: str) -> set[str]:
    """The words a question asks with (lower-case words, not names: no ``Mount``), as
    singulars and with the nouns they name (``born``: also ``birth``), without the
    words of asking and comparing (``how``, ``much``, ``more``)."""
    out: set[str] = set()
    for word in re.findall(r"\b[a-z]{3,}\b", question):
        if word in _STOP:
            continue
        out.add(_stem(word))
        if word in _NOUNS:
            out.add(_NOUNS[word])
    return out


def named_values(question: str, tools: Sequence[Any]) -> dict[str, dict[str, list[Any]]]:
    """For a question that compares two or more names, the one value of each enum
    argument that the question's words name most (``birth_year``, two words, of "how
    many years after Marie Curie was Alan Turing born", not ``death_year``, one; the
    lookups of things compared read the same field), by tool and argument. An argument
    whose values the question names none of, or several equally, is not listed; nor is
    any for a question about one name ("how old was Alan Turing when he died" reads two
    fields of one person)."""
    if not compares(question) or len(question_names(question)) < 2:
        return {}
    asked = question_words(question)
    out: dict[str, dict[str, list[Any]]] = {}
    for spec in tool_specs(tools):
        for param in spec.params:
            enum = param.schema.get("enum")
            if not isinstance(enum, list):
                continue
            score = {x: len(_words(x) & asked) for x in enum if isinstance(x, str)}
            best = max(score.values(), default=0)
            named = [x for x, n in score.items() if n == best]
            if best and len(named) == 1:
                out.setdefault(spec.name, {})[param.name] = named
    return out


def _returns(tool: Any) -> Any:
    """The return type a Python tool (a function or a FunctionTool) declares, or None."""
    for fn in (getattr(tool, "async_fn", None), getattr(tool, "fn", None), tool):
        if callable(fn):
            try:
                return typing.get_type_hints(fn).get("return")
            except Exception:  # noqa: BLE001 - an unresolvable hint is no hint
                continue
    return None


def avoided_tools(context: PromptContext, tools: Sequence[Any]) -> list[str]:
    """Tools a comparing plan calls only after the calculator: when earlier rounds
    found every operand (:func:`operands_found`), every other tool (the lookups of a
    replan would only repeat them); else :func:`later_tools`."""
    calculator = compute_tool(tools)
    if calculator is not None and operands_found(context):
        return [s.name for s in tool_specs(tools) if s.name != calculator]
    return later_tools(tools, context.question)


def required_tool(context: PromptContext, tools: Sequence[Any]) -> str | None:
    """The calculator, for a question that compares and has no computed result yet."""
    tool = compute_tool(tools) if compares(context.question) else None
    done = any(t.tool == tool and not found_nothing(t) for r in context.rounds for t in r.tasks)
    return None if done else tool
