"""What a plan or an answer may take from the question, the tools and the observations.

Small models retype names they could copy (``search("Dauphin")`` for the Danube), copy
the values of their few-shot examples into plans, and write numbers no observation
holds. Under constrained decoding the grammars take what this module reads, by
structure only (no word of any language is listed here):

* :func:`plan_writable`: what a plan may write (:class:`~llm_compiler.dialects.grammar.Writable`):
  strings that are spans of the question or of what earlier rounds found, values the
  tools declare (enums, and codes their descriptions list), the numbers of the question
  and the observations, ``$N`` references, and the calls that failed (not to repeat);
* :func:`answer_values`: the numbers an answer may write and the values it states.

These aids narrow what a value may be; none adds, requires or merges a call. They
apply under constrained decoding while ``CompilerConfig.value_aids`` is on (the
default); what a task's outcome was (it raised, timed out, found nothing) is a fact
of its record (:func:`~llm_compiler.dialects.prompting.found_nothing`), and what the
engine does about it lives in :mod:`llm_compiler.engine.replan`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llm_compiler.dialects.grammar import Writable
from llm_compiler.dialects.plan_lines import parse_task_line
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord, found_nothing
from llm_compiler.tools.spec import ARITHMETIC, tool_specs

_CAP = r"[^\W\d_a-z][\w-]*"
_NAME = re.compile(rf"(?<![\w-]){_CAP}(?:[ \t]+{_CAP})*")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
#: Signs that end a sentence (or open one: ``¿``, ``¡``).
_SENTENCE_END = ".!?\n\u00bf\u00a1"
MAX_NAMES = 80
#: Most words of one name: a longer run of capitalized words gives its parts of this
#: length, so reading a run stays linear in it.
MAX_NAME_WORDS = 8
MAX_NUMBERS = 120
#: Most characters of one observation a plan may copy spans of.
MAX_SPAN_SOURCE = 400


def names(texts: Iterable[str], limit: int = MAX_NAMES, *, starts: bool = True) -> list[str]:
    """Capitalized names in `texts`, longest first, with their shorter parts.

    ``"How much longer is Golden Gate Bridge than M25?"`` gives ``Golden Gate Bridge``,
    ``Golden Gate``, ``Gate Bridge``, ``Golden``, ``Bridge``, ``Gate``, ``M25``, and
    ``How`` unless `starts` is False (a sentence's first
    word is capitalized whatever it is). A run longer than :data:`MAX_NAME_WORDS` words
    gives its parts of that length.
    """
    found: dict[str, None] = {}
    for text in texts:
        for match in _NAME.finditer(text):
            words = match.group().split()
            if not starts and _starts_sentence(text, match.start()):
                words = words[1:]
            for i in range(len(words)):
                for j in range(min(len(words), i + MAX_NAME_WORDS), i, -1):
                    found[" ".join(words[i:j])] = None
    ordered = sorted(found, key=lambda n: (-len(n.split()), -len(n)))
    return ordered[:limit]


def name_runs(text: str) -> list[tuple[int, int]]:
    """Where `text`'s runs of capitalized words are, as (start, end): each run whole,
    less a first word that starts a sentence."""
    out = []
    for match in _NAME.finditer(text):
        start = match.start()
        if _starts_sentence(text, start):
            rest = re.match(r"\S+[ \t]+", text[start : match.end()])
            if rest is None:
                continue
            start += rest.end()
        out.append((start, match.end()))
    return out


def _starts_sentence(text: str, i: int) -> bool:
    """Whether the word at `i` starts `text` or a sentence of it (a few signs back)."""
    j = i - 1
    while j >= 0 and i - j < 8 and text[j] in " \t\"'(":
        j -= 1
    return j < 0 or text[j] in _SENTENCE_END


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


def failed_calls(context: PromptContext, tools: Sequence[Any]) -> dict[str, list[tuple[Any, ...]]]:
    """The calls of earlier rounds that found nothing or were rejected, by tool: each
    one's required arguments' values in order (for a replan's grammar, which may not
    write them again). Calls with a reference among those values are left out (the same
    text may name other results in a new round), and so are skipped ones."""
    return _failed(_literal_calls(context, tools))


_Calls = list[tuple[Any, tuple[Any, ...], TaskRecord]]


def _failed(calls: _Calls) -> dict[str, list[tuple[Any, ...]]]:
    out: dict[str, list[tuple[Any, ...]]] = {}
    for spec, values, _ in calls:
        out.setdefault(spec.name, [])
        if values not in out[spec.name]:
            out[spec.name].append(values)
    return out


def suggested_values(
    context: PromptContext, tools: Sequence[Any]
) -> dict[str, dict[tuple[Any, ...], list[Any]]]:
    """Values a replan's call may take for a failed call's last required argument, when
    that argument is an enum and the failure names some of its other values: by tool,
    by the call's other required values. ``lookup("Tower Bridge", "height_m")``
    failed with "has no field 'height_m'; known fields: opened_year, length_m": a
    replan's ``lookup("Tower Bridge", ...)`` takes ``opened_year`` or ``length_m``.
    Of those, the ones that share a word with the question, if any.
    """
    return _suggested(_literal_calls(context, tools), context.question)


def _suggested(failed: _Calls, question: str) -> dict[str, dict[tuple[Any, ...], list[Any]]]:
    out: dict[str, dict[tuple[Any, ...], list[Any]]] = {}
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
    asked = _words(question)
    for by_values in out.values():  # of those, the ones that share a word with the question
        for key, allowed in by_values.items():
            by_values[key] = [x for x in allowed if asked & _words(x)] or allowed
    return out


def _words(text: str) -> set[str]:
    """The words of `text` (lower case, any script, ``_`` parts apart)."""
    return {w for w in re.findall(r"[^\W\d_]{3,}", text.lower())}


def _literal_calls(context: PromptContext, tools: Sequence[Any]) -> _Calls:
    """Each call that found nothing whose required values are all literals: its tool's
    spec, those values in order, and its record."""
    specs = {spec.name: spec for spec in tool_specs(tools)}
    out = []
    records = [t for r in context.rounds for t in r.tasks]
    for record in records:
        spec = specs.get(record.tool)
        if spec is None or record.skipped or not found_nothing(record):
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
        if all(isinstance(v, str | int | float | bool) for v in values):
            out.append((spec, values, record))
    return out


def text_result_ids(context: PromptContext) -> set[int]:
    """Earlier rounds' tasks whose results are texts, not numbers: a calculation cannot
    name them (``calculator("$1 + $2")`` of two profiles fails; it writes the numbers
    they hold)."""
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


def observation_texts(rounds: Sequence[RoundRecord], *, found: bool = True) -> list[str]:
    """The observations of `rounds`: those that found something (or every one)."""
    return [
        t.observation
        for r in rounds
        for t in r.tasks
        if t.observation is not None and (not found or not found_nothing(t))
    ]


#: Codes a tool's description lists as values it takes: two or more, separated by
#: commas, slashes or bars (``EUR, USD, JPY``; ``C/F``).
_CODE = r"[A-Z][A-Z0-9]{0,7}"
_CODE_LIST = re.compile(rf"\b{_CODE}(?:\s*[,/|]\s*{_CODE})+\b")


def declared_values(tools: Sequence[Any]) -> dict[str, list[str]]:
    """By tool, the codes its description lists as values (``EUR`` of "another
    currency (EUR, USD, JPY)"), which a question may name otherwise ("in euros")."""
    out: dict[str, list[str]] = {}
    for tool, spec in zip(tools, tool_specs(tools), strict=True):
        texts = [_description(tool), *(str(p.schema.get("description", "")) for p in spec.params)]
        codes = [c for t in texts for run in _CODE_LIST.findall(t) for c in re.findall(_CODE, run)]
        if codes:
            out[spec.name] = list(dict.fromkeys(codes))
    return out


def _description(tool: Any) -> str:
    metadata = getattr(tool, "metadata", None)
    text = getattr(metadata, "description", None) or getattr(tool, "__doc__", None)
    return text if isinstance(text, str) else ""


def plan_writable(context: PromptContext, tools: Sequence[Any]) -> Writable:
    """What a plan for `context` may write (see the module docstring), in one pass."""
    found = [t[:MAX_SPAN_SOURCE] for t in observation_texts(context.rounds)]
    texts = (context.question, *found)
    numbers = [n for n in number_forms(texts) if "," not in n]
    failed = _literal_calls(context, tools)  # earlier plan lines, parsed once
    return Writable(
        texts=texts,
        values=declared_values(tools),
        numbers=tuple(numbers),
        compute=compute_tool(tools),
        exclude=_failed(failed),
        suggest=_suggested(failed, context.question),
        text_ids=tuple(sorted(text_result_ids(context))),
    )


def answer_values(context: PromptContext) -> tuple[list[str], list[str]]:
    """(numbers the answer may write, values one of which it must state).

    Numbers come from the question and the observations that found something; the
    values it must state (one at least, or say it could not find) are those
    observations' numbers and names.
    """
    found = observation_texts(context.rounds)
    numbers = number_forms([context.question, *found])
    return numbers, number_forms(found) + names(found)


def compute_tool(tools: Sequence[Any]) -> str | None:
    """The name of the first tool that computes expressions (a calculator), if any: one
    whose one required parameter declares the ``arithmetic`` format
    (:data:`~llm_compiler.tools.spec.Expression`; ``{"type": "string", "format":
    "arithmetic"}`` in a JSON schema). Its name and description do not make it one.
    """
    for spec in tool_specs(tools):
        required = [p for p in spec.params if p.required]
        if spec.call_form and len(required) == 1 and _computes(required[0].schema):
            return spec.name
    return None


def _computes(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "string" and schema.get("format") == ARITHMETIC


#: Shortest word that may name a tool (shorter ones are mostly words of grammar).
MIN_NAMING_WORD = 5
#: Most tools a question's words name.
MAX_NAMED_TOOLS = 2


def _tool_words(tool: Any, spec: Any) -> set[str]:
    """The words a tool declares: of its name, its parameters' names, its description."""
    texts = [spec.name, *(p.name for p in spec.params), _description(tool)]
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", " ".join(texts))
    return _words(spaced.replace("_", " "))


def named_tools(question: str, tools: Sequence[Any]) -> list[str]:
    """Tools the question names: a word of it (of :data:`MIN_NAMING_WORD` letters or
    more) is one that only that tool declares (``Fahrenheit`` of "Convert degrees
    Celsius to Fahrenheit" beside "The temperature in a city, in degrees Celsius").
    At most :data:`MAX_NAMED_TOOLS`, those named by most words, in the tools' order.
    Read by the answer to leave out results nobody asked for; never a required call."""
    specs = tool_specs(tools)
    declared = [_tool_words(tool, spec) for tool, spec in zip(tools, specs, strict=True)]
    asked = {w for w in _words(question) if len(w) >= MIN_NAMING_WORD}
    counts = [
        len({w for w in asked & own if sum(w in other for other in declared) == 1})
        for own in declared
    ]
    ranked = sorted((-n, i) for i, n in enumerate(counts) if n)[:MAX_NAMED_TOOLS]
    return [specs[i].name for i in sorted(i for _, i in ranked)]
