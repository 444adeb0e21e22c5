"""Grammars that make a model write only well-formed plans and joiner answers.

:func:`plan_grammar` and :func:`joiner_grammar` return GBNF for llama.cpp's ``grammar``
request field; :func:`json_plan_schema` is the JSON Schema alternative for servers with
structured output, and :func:`json_plan_text` turns such a plan into plan text.

A plan grammar is generated from the run's tools. Every line it allows parses with
:class:`~llm_compiler.dialects.plan_lines.PlanParser` without errors:

* lines are numbered ``first_id``, ``first_id + 1``, ... (the grammar counts, up to
  `max_tasks`), each optionally after one ``Thought: ...`` line;
* a line calls one of the given tools, ``name("positional", key=value)``: arguments in
  declared order, positional ones first, required ones present, values of the declared
  JSON-schema type (enums and consts as exactly their literals);
* ``$N`` may stand for any value and names only a task of an earlier round
  (`known_ids`) or an earlier line;
* the plan ends with ``N. join()`` and ``<END_OF_PLAN>``; join is allowed after every
  task and forced after `max_tasks`.

A tool whose name is not word-like (``my tool``) or has a parameter that cannot be a
Python keyword argument (``from``, ``max-results``) is written as a JSON line instead,
``N. {"tool name": {"from": 1}}``, which the parser also reads (references are then
strings, ``"$1"``). The prompt's tool list should show such tools in that form.

With a :class:`Writable` (constrained decoding on a question), every literal comes from
somewhere: a string is a span of the question or of an earlier observation, or a value
a tool declares; a number is one the question or an observation writes; enums and
booleans are the declared ones; else ``$N``. Few-shot examples show shapes, and their
values cannot be written unless the question has them.

Not constrained: ``$N`` written inside a string (a template), string ``pattern`` and
``format``, numeric bounds and ``minItems``/``maxItems``. Parameter names are the
schema's, which are aliases for pydantic fields that have them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools.spec import ToolSpec, alternatives, tool_specs

DEFAULT_MAX_TASKS = 10
#: What a grounded answer says when the observations do not answer the question.
NOT_FOUND = "could not find"

#: Most characters of a string argument in a constrained plan (a small model denied the
#: value it wanted may otherwise write one string until its token budget ends: 209 s).
MAX_STRING = 300
# Shared terminals. Strings: no raw newline or control characters, and only escapes
# that mean the same in Python and JSON.
_TERMINALS = r"""
str ::= "\"" str-char{0,MAX_STRING} "\""
str-char ::= [^"\\\x00-\x1F\x7F] | "\\" ["\\nrt] | "\\u" [0-9a-fA-F]{4}
int ::= "-"? ("0" | [1-9] [0-9]{0,17})
num ::= int ("." [0-9]{1,17})? ([eE] [-+]? [0-9]{1,3})?
thought ::= "Thought: " [^\n]+ "\n"
"""
_TERMINALS = _TERMINALS.replace("MAX_STRING", str(MAX_STRING))
#: An arithmetic expression's string: no capital letter (``"MSFT - AAPL"`` names, it does
#: not compute; functions such as ``sqrt`` and references ``$1`` stay).
_EXPR_STR = r'"\"" ([^"\\A-Z\x00-\x1F\x7F] | "\\" ["\\nrt])* "\""'
#: Most characters between the references of an expression (a model denied the
#: references it copies may otherwise write digits until its token budget ends).
MAX_EXPRESSION_RUN = 60
_RESERVED = ("root", "str", "str-char", "int", "num", "thought", "expr-str")
#: A word or a sign of a text a string argument may copy spans of.
_TOKEN = re.compile(r"[^\W_]+(?:[.\-_/:@][^\W_]+)*|\S")
#: Most words of all texts whose spans a plan may copy.
MAX_SPAN_TOKENS = 600
_DIALECTS = {
    # true/false/null words, and how a reference to task N is written.
    "py": {"true": "True", "false": "False", "null": "None", "ref": "${}"},
    "json": {"true": "true", "false": "false", "null": "null", "ref": '"${}"'},
}


def gbnf_literal(text: str) -> str:
    """`text` as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


def value_literal(value: Any, dialect: str) -> str:
    """A JSON value as the model writes it: a Python literal, or JSON."""
    words = _DIALECTS[dialect]
    if value is True or value is False or value is None:
        return words[{True: "true", False: "false", None: "null"}[value]]
    if isinstance(value, list):
        return "[" + ", ".join(value_literal(v, dialect) for v in value) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k))}: {value_literal(v, dialect)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class Writable:
    """What a constrained plan may write (see the module docstring): each field narrows
    what a value may be; none adds, requires or merges a call.

    Attributes:
        texts: A string argument is a span of one of these: whole words, in order, as
            written (the question, then what earlier rounds found).
        values: Or, in a call of a tool, one of the values it declares whole (codes its
            description lists), by tool.
        numbers: A number argument (and a number in an expression) is one of these.
        compute: The tool that evaluates arithmetic (the calculator): its string
            argument is ``$N`` references, `numbers` and operators.
        exclude: Calls not to write again, by tool: the values of each failed or
            rejected call's required arguments, in order (``{"lookup": [("Emma",
            "length_m")]}``).
        suggest: For a call `exclude` constrains, by tool and by the values of its
            other required arguments: the only values its last required argument, an
            enum, may then take (those its failure named).
        text_ids: Earlier tasks whose results are texts: expressions do not name them.
    """

    texts: tuple[str, ...] = ()
    values: Mapping[str, Sequence[str]] = field(default_factory=dict)
    numbers: tuple[str, ...] = ()
    compute: str | None = None
    exclude: Mapping[str, Sequence[tuple[Any, ...]]] = field(default_factory=dict)
    suggest: Mapping[str, Mapping[tuple[Any, ...], Sequence[Any]]] = field(default_factory=dict)
    text_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class _Text:
    """A text whose spans a string may be: its tokens, the gap after each, and the
    rule that writes the span starting at each token."""

    tokens: tuple[str, ...]
    gaps: tuple[str, ...]
    starts: tuple[str, ...]


def _json_text(text: str) -> str:
    """`text` as a GBNF literal of its JSON string body."""
    return gbnf_literal(json.dumps(text, ensure_ascii=False)[1:-1])


def _is_word(token: str) -> bool:
    return any(c.isalnum() for c in token)


class _Rules:
    """GBNF rules by name; identical bodies share one rule.

    `string`, `integer` and `number` are the rules of such values: free (``str``,
    ``int``, ``num``) without a :class:`Writable`, else what it allows ('' when
    nothing: such an argument can only be a reference).
    """

    def __init__(self, writable: Writable | None = None) -> None:
        self.rules: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self.writable = writable
        self.string, self.integer, self.number = "str", "int", "num"
        self._texts: list[_Text] = []
        if writable is not None:
            self._texts = self._span_texts(writable.texts)
            self.string = self.string_except(())
            ints = [n for n in writable.numbers if re.fullmatch(r"\d+", n)]
            self.integer = self._choice("w-int", ints)
            self.number = self._choice("w-num", list(writable.numbers))

    def _choice(self, hint: str, values: Sequence[str]) -> str:
        if not values:
            return ""
        return self.add(hint, " | ".join(gbnf_literal(v) for v in dict.fromkeys(values)))

    def _span_texts(self, texts: Sequence[str]) -> list[_Text]:
        """One rule per token: its span goes on to the next token's or ends (only
        after a word)."""
        out, budget = [], MAX_SPAN_TOKENS
        for t, text in enumerate(texts):
            found = list(_TOKEN.finditer(text))[:budget]
            while found and not _is_word(found[-1].group()):
                found.pop()
            budget -= len(found)
            tokens = tuple(m.group() for m in found)
            gaps = tuple(
                " " if a.end() < b.start() else "" for a, b in zip(found, found[1:], strict=False)
            ) + ("",)
            starts: list[str] = [""] * len(tokens)
            for i in reversed(range(len(tokens))):
                body = _json_text(tokens[i])
                if i + 1 < len(tokens):
                    rest = f"{gbnf_literal(gaps[i])} {starts[i + 1]}" if gaps[i] else starts[i + 1]
                    body += f" ({rest})?" if _is_word(tokens[i]) else f" {rest}"
                starts[i] = self.add(f"sp{t}-{i}", body)
            out.append(_Text(tokens, gaps, tuple(starts)))
        return out

    def string_except(self, values: Sequence[str], declared: Sequence[str] = ()) -> str:
        """A string rule: a span of the texts or one of `declared`, none of `values`.

        At a token where an excluded value starts, the span goes on through a chain
        of its own that cannot stop where that value ends ('' if nothing is left)."""
        banned = set(values)
        longest = max((len(v) for v in banned), default=0)
        options = [_json_text(v) for v in declared if v not in banned]
        for t, text in enumerate(self._texts):
            for i, token in enumerate(text.tokens):
                if _is_word(token):
                    options.append(self._start_except(t, text, i, banned, longest))
        body = _alt(o for o in options if o)
        if not body:
            return ""
        hint = "span-str" if not banned and not declared else "span-str-x"
        return self.add(hint, f'"\\"" {body} "\\""')

    def _start_except(self, t: int, text: _Text, i: int, banned: set[str], longest: int) -> str:
        """The span rule at token `i` of `text`, with no span one of `banned`."""
        ends, written = set(), ""
        for j in range(i, len(text.tokens)):
            written += text.tokens[j]
            if len(written) > longest:
                break
            if written in banned:
                ends.add(j)
            written += text.gaps[j]
        if not ends:
            return text.starts[i]
        last = max(ends)
        chain: dict[int, str] = {}  # token j of the span from i: its rule, '' if none
        for j in reversed(range(i, last + 1)):
            if j < last:
                after = chain[j + 1]
            else:
                after = text.starts[j + 1] if j + 1 < len(text.tokens) else ""
            gap = gbnf_literal(text.gaps[j]) if text.gaps[j] else ""
            goes_on = f"{gap} {after}".strip() if after else ""
            token = _json_text(text.tokens[j])
            may_stop = j not in ends and _is_word(text.tokens[j])
            if goes_on and may_stop:
                chain[j] = self.add(f"sx{t}-{i}-{j}", f"{token} ({goes_on})?")
            elif goes_on or may_stop:
                chain[j] = self.add(f"sx{t}-{i}-{j}", f"{token} {goes_on}".strip())
            else:
                chain[j] = ""
        return chain[i]

    def expression(self, refs: Sequence[int] | None = None) -> str:
        """The rule of an arithmetic expression's string: no capital letter.

        With `refs`, a ``$N`` inside it names one of them (``"$1 - $2"`` on a replan
        cannot name a task that failed), and not one named before in it; else ``$`` is
        free. With a :class:`Writable`, each number in it is one of its numbers, whole.
        """
        if refs is None:
            self.rules.setdefault("expr-str", _EXPR_STR)
            return "expr-str"
        plain = '[^"\\\\$A-Z\\x00-\\x1F\\x7F]'
        item = f'({plain} | "\\\\" ["\\\\nrt]){{0,{MAX_EXPRESSION_RUN}}}'
        after = plain.replace("A-Z", "A-Z0-9")  # no digit after $N: "$12" is not "$1"
        if self.writable is not None:  # each number whole, one of them
            number = self._choice("expr-num", list(self.writable.numbers))
            unit = f'({after} | "\\\\" ["\\\\nrt]' + (f" | {number} {after})" if number else ")")
            item = f"{unit}{{0,{MAX_EXPRESSION_RUN}}}" + (f" {number}?" if number else "")
        ids = sorted(set(refs))
        if not ids:
            return self.add("expr-str-0", f'"\\"" {item} "\\""')
        firsts = []
        for i in ids:  # after "$i", later references name other tasks ("$1 - $1" is 0)
            others = [gbnf_literal(str(j)) for j in ids if j != i]
            rest = f"expr-rest-{i}-of-" + "-".join(map(str, ids))  # names itself: unique
            more = f' ("$" ({" | ".join(others)}) ({after} {rest})?)?' if others else ""
            rest = self.add(rest, f"{item}{more}")
            firsts.append(f'"{i}" ({after} {rest})?')
        body = f'"\\"" {item} ("$" ({" | ".join(firsts)}))? "\\""'
        return self.add(f"expr-str-{len(refs)}", body)

    def add(self, hint: str, body: str) -> str:
        if body in self._names:
            return self._names[body]
        base = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        name, n = base, 1
        while name in self.rules or name in _RESERVED:
            n += 1
            name = f"{base}-{n}"
        self.rules[name] = body
        self._names[body] = name
        return name

    def render(self, root: str) -> str:
        lines = [f"root ::= {root}"] + [f"{k} ::= {v}" for k, v in self.rules.items()]
        return "\n".join(lines) + _TERMINALS


def _alt(options: Iterable[str]) -> str:
    """One of `options` ('' ones left out; '' if none is left)."""
    unique = list(dict.fromkeys(o for o in options if o))
    if len(unique) <= 1:
        return unique[0] if unique else ""
    return "(" + " | ".join(unique) + ")"


class _Values:
    """Value rules for one plan line: typed values in one dialect, references allowed."""

    def __init__(self, rules: _Rules, dialect: str, ref_ids: Sequence[int], tag: str) -> None:
        self.rules, self.dialect, self.tag = rules, dialect, tag
        self.words = _DIALECTS[dialect]
        self.ref_ids = sorted(ref_ids)
        self._ref: str | None = None
        self.declared: Sequence[str] = ()  # the values the called tool declares
        self.string = rules.string

    @property
    def ref(self) -> str:
        """The rule for a reference to an allowed task ('' when there is none yet)."""
        if self._ref is None:  # made on first use: unused rules would only cost parsing
            refs = " | ".join(gbnf_literal(self.words["ref"].format(i)) for i in self.ref_ids)
            self._ref = self.rules.add(f"ref-{self.dialect}-{self.tag}", refs) if refs else ""
        return self._ref

    def lit(self, value: Any) -> str:
        return gbnf_literal(value_literal(value, self.dialect))

    def value(self, schema: Mapping[str, Any], hint: str, depth: int = 0) -> str:
        """An expression for a value of `schema` or a reference ('' if none can be
        written)."""
        return _alt([self.ref, self.typed(schema, hint, depth)])

    def typed(self, schema: Mapping[str, Any], hint: str, depth: int) -> str:  # noqa: C901
        if "const" in schema:
            return self.lit(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return _alt(self.lit(v) for v in schema["enum"])
        branches = alternatives(schema)
        if branches is not None:
            return _alt(self.typed(b, hint, depth + 1) for b in branches)
        kind = schema.get("type")
        if kind == "string":
            return self.string
        if kind == "integer":
            return self.rules.integer
        if kind == "number":
            return self.rules.number
        if kind == "boolean":
            return f"({gbnf_literal(self.words['true'])} | {gbnf_literal(self.words['false'])})"
        if kind == "null":
            return gbnf_literal(self.words["null"])
        if kind == "array" and depth < 8:
            items = schema.get("items")
            item = self.value(
                items if isinstance(items, Mapping) else {}, hint + "-item", depth + 1
            )
            body = f'"[" ({item} (", " {item})*)? "]"' if item else '"[]"'
            return self.rules.add(f"{hint}-list-{self.dialect}-{self.tag}", body)
        if kind == "object" and schema.get("properties") and depth < 8:
            return self.record(schema, hint, depth)
        return self.any()

    def record(self, schema: Mapping[str, Any], hint: str, depth: int) -> str:
        required = set(schema.get("required", ()))
        props = schema["properties"].items()
        values = {k: self.value(v, f"{hint}-{k}", depth + 1) for k, v in props}
        if any(not values[k] for k in required if k in values):
            return ""
        items = [
            (f"{gbnf_literal(json.dumps(k) + ': ')} {e}" if e else "", k in required)
            for k, e in values.items()
        ]
        chain = _first(self.rules, items, f"{hint}-{self.tag}")
        return self.rules.add(f"{hint}-obj-{self.dialect}-{self.tag}", f'"{{" {chain} "}}"')

    def any(self) -> str:
        """Any JSON-ish value (recursive), references included."""
        name = f"any-{self.dialect}-{self.tag}"
        if name not in self.rules.rules:
            w = self.words
            written = [r for r in (self.rules.string, self.rules.number) if r]
            scalars = " | ".join(written + [gbnf_literal(w[k]) for k in w if k != "ref"])
            key = self.rules.string or "str"
            self.rules.rules[name] = (
                f"{self.ref + ' | ' if self.ref else ''}{scalars}"
                f' | "[" ({name} (", " {name})*)? "]"'
                f' | "{{" ({key} ": " {name} (", " {key} ": " {name})*)? "}}"'
            )
        return name


def _tail(rules: _Rules, items: list[tuple[str, bool]], hint: str, i: int = 0) -> str:
    """Items `i`.. in order, each written as ``, item``; optional ones may be left out."""
    if i >= len(items):
        return ""
    expr, required = items[i]
    if not expr:  # an optional argument that has no value
        return _tail(rules, items, hint, i + 1)
    rest = _tail(rules, items, hint, i + 1)
    head = f'", " {expr}' if required else f'(", " {expr})?'
    return rules.add(f"{hint}-tail{i}", f"{head} {rest}".strip())


def _first(rules: _Rules, items: list[tuple[str, bool]], hint: str, i: int = 0) -> str:
    """Items `i`.. in order, comma-separated, without a comma before the first one."""
    if i >= len(items):
        return ""
    expr, required = items[i]
    if not expr:  # an optional argument that has no value
        return _first(rules, items, hint, i + 1)
    written = f"{expr} {_tail(rules, items, hint, i + 1)}".strip()
    if required:
        return rules.add(f"{hint}-first{i}", written)
    rest = _first(rules, items, hint, i + 1)
    body = f"{written} | {rest}" if rest else written
    return f"({rules.add(f'{hint}-first{i}', body)})?"


def _positional(rules: _Rules, values: list[str], kw: list[tuple[str, bool]], hint: str) -> str:
    """Arguments of a call: a positional prefix, then the rest as keywords."""

    def after(i: int) -> str:  # `i` positional arguments written so far
        if i >= len(values):
            return _tail(rules, kw, hint, i)
        tail = _tail(rules, kw, hint, i)
        more = f'", " {values[i]} {after(i + 1)}'.strip()
        return rules.add(f"{hint}-pos{i}", f"{more} | {tail}" if tail else f"({more})?")

    first = _first(rules, kw, hint)
    if not values:
        return first
    return rules.add(f"{hint}-args", f"{values[0]} {after(1)}".strip() + f" | {first}")


def _tool_call(rules: _Rules, spec: ToolSpec, index: int, values: dict[str, _Values]) -> str | None:
    """One tool's call on one line, in call form or JSON form; None if a required
    argument can have no value (a number where nothing wrote one).

    The calculator's (`Writable.compute`) string arguments are arithmetic, naming no
    task whose result is a text; a call `Writable.exclude` lists is not written again.
    """
    hint = f"t{index}-{spec.name}-{values['py'].tag}"
    writable = rules.writable or Writable()
    declared = tuple(writable.values.get(spec.name, ()))
    for v in values.values():
        v.declared = declared
        v.string = (
            rules.string_except((), declared) if rules.writable and declared else rules.string
        )
    compute = writable.compute == spec.name
    exclude = writable.exclude.get(spec.name, ())
    if spec.call_form and exclude and not compute:
        suggest = writable.suggest.get(spec.name)
        excluding = _excluding_call(rules, spec, index, values["py"], exclude, hint, suggest)
        if excluding is not None:
            return excluding or None
    v = values["py" if spec.call_form else "json"]
    refs = [i for i in v.ref_ids if i not in set(writable.text_ids)]
    typed = [
        _alt([v.ref, rules.expression(refs)])
        if compute and p.schema.get("type") == "string"
        else v.value(p.schema, f"t{index}-{p.name}")
        for p in spec.params
    ]
    if any(p.required and not e for p, e in zip(spec.params, typed, strict=True)):
        return None
    if spec.call_form:
        kw = [
            (f"{gbnf_literal(p.name + '=')} {e}" if e else "", p.required)
            for p, e in zip(spec.params, typed, strict=True)
        ]
        # Positional up to the first argument that has no value (an optional one).
        prefix = typed[: next((i for i, e in enumerate(typed) if not e), len(typed))]
        args = _positional(rules, prefix, kw, hint)
        body = f"{gbnf_literal(spec.name + '(')} {args} {gbnf_literal(')')}".replace("  ", " ")
    else:
        kw = [
            (f"{gbnf_literal(json.dumps(p.name) + ': ')} {e}" if e else "", p.required)
            for p, e in zip(spec.params, typed, strict=True)
        ]
        args = _first(rules, kw, hint)
        head = gbnf_literal("{" + json.dumps(spec.name) + ": {")
        body = f"{head} {args} {gbnf_literal('}}')}".replace("  ", " ")
    return rules.add(hint, body)


def _excluding_call(
    rules: _Rules,
    spec: ToolSpec,
    index: int,
    v: _Values,
    exclude: Sequence[tuple[Any, ...]],
    hint: str,
    suggest: Mapping[tuple[Any, ...], Sequence[Any]] | None = None,
) -> str | None:
    """A call with its required arguments, positional, that is none of `exclude`
    ('' if every call is excluded).

    Each tuple holds a failed call's required values in order. Written as a tree: at
    each argument, one of the failed calls' values (then the rest must differ) or a
    value none of them has (then any rest). A string differs by being another span
    (:meth:`_Rules.string_except`), an enum by its other values (only those `suggest`
    gives for the values before it, if it gives some); None if an argument cannot be
    told apart (a number, a free string), or the tool has optional arguments only.
    """
    params = [p for p in spec.params if p.required]
    if not params:
        return None
    failed = [t for t in exclude if len(t) == len(params)]
    if not failed:
        return None

    def general(i: int) -> str:
        return " ".join(
            f'", " {v.value(p.schema, f"t{index}-{p.name}")}' for p in params[i:]
        ).strip()

    def tree(i: int, tuples: list[tuple[Any, ...]]) -> str | None:
        sep = '", " ' if i else ""
        if not tuples:
            return general(i)
        if i == len(params):
            return None  # a call that failed
        taken = list(dict.fromkeys(t[i] for t in tuples))
        options = []
        for value in taken:
            rest = tree(i + 1, [t for t in tuples if t[i] == value])
            if rest is not None:
                options.append(f"{sep}{v.lit(value)} {rest}".strip())
        differ = _other_value(rules, v, params[i].schema, taken)
        hinted = (suggest or {}).get(tuples[0][:i], ()) if i == len(params) - 1 else ()
        enum = params[i].schema.get("enum") or ()
        if rest_hinted := [x for x in hinted if x in enum and x not in taken]:
            differ = _alt(v.lit(x) for x in rest_hinted)
        if differ is None:
            raise _CannotExclude
        if differ or v.ref:
            options.append(f"{sep}{_alt([v.ref, differ])} {general(i + 1)}".strip())
        if not options:
            return None
        return rules.add(f"{hint}-x{i}", " | ".join(options))

    try:
        args = tree(0, failed)
    except _CannotExclude:
        return None
    if args is None:
        return ""
    body = f"{gbnf_literal(spec.name + '(')} {args} {gbnf_literal(')')}"
    return rules.add(hint, body)


def _other_value(
    rules: _Rules, v: _Values, schema: Mapping[str, Any], taken: list[Any]
) -> str | None:
    """A value of `schema` none of `taken` ('' if there is none; None if a grammar
    cannot tell: only enums and written strings can be told apart)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        rest = [x for x in schema["enum"] if x not in taken]
        return _alt(v.lit(x) for x in rest) if rest else ""
    written = rules.writable is not None and schema.get("type") == "string"
    if written and all(isinstance(x, str) for x in taken):
        return rules.string_except(taken, v.declared)
    return None


class _CannotExclude(Exception):
    """An argument of a failed call that a grammar cannot tell apart from others."""


def json_line_tools(tools: Sequence[Any]) -> list[str]:
    """Names of the tools a plan grammar makes the model call with a JSON line.

    The prompt's tool list should show these as ``{"name": {"param": type}}``.
    """
    return [spec.name for spec in tool_specs(tools) if not spec.call_form]


def plan_grammar(
    tools: Sequence[Any],
    *,
    first_id: int = 1,
    max_tasks: int = DEFAULT_MAX_TASKS,
    known_ids: Iterable[int] = (),
    allow_thoughts: bool = True,
    writable: Writable | None = None,
) -> str:
    """GBNF for a plan over `tools` (BaseTools or callables), numbered from `first_id`.

    Args:
        tools: The tools the plan may call.
        first_id: The number of the first line (on a replan, the next free task id).
        max_tasks: Most tool calls before ``join()`` is forced.
        known_ids: Ids of earlier rounds' tasks, which ``$N`` may also name.
        allow_thoughts: Allow a ``Thought: ...`` line before each numbered line.
        writable: What literals the plan may write (see :class:`Writable`); None:
            any value of the declared type.

    Returns:
        The grammar text (root rule ``root``). A tool none of whose calls can be
        written (a required number where nothing wrote one) is left out; if no tool
        is left, the plan is ``join()`` alone.
    """
    specs = tool_specs(tools)
    if not specs:
        raise ValueError("A plan grammar needs at least one tool.")
    if max_tasks < 1 or first_id < 1:
        raise ValueError("max_tasks and first_id must be at least 1.")
    rules, known = _Rules(writable), sorted(set(known_ids))
    lines: list[dict[str, str]] = []  # by line: each tool's call rule
    for k in range(max_tasks):
        refs = [i for i in known if i < first_id] + list(range(first_id, first_id + k))
        values = {d: _Values(rules, d, refs, f"l{k + 1}") for d in _DIALECTS}
        lines.append(
            {s.name: c for n, s in enumerate(specs) if (c := _tool_call(rules, s, n, values))}
        )
    plan = _Lines(rules, lines, first_id, "thought? " if allow_thoughts else "")
    return rules.render(plan.rule(0))


class _Lines:
    """The rules of a plan's lines: line `k` and the rest, numbered from `first_id`; a
    plan has one task at least (unless no tool can be called)."""

    def __init__(self, rules: _Rules, lines: list[dict[str, str]], first_id: int, thought: str):
        self.rules, self.lines, self.first_id, self.thought = rules, lines, first_id, thought
        self._made: dict[int, str] = {}

    def join_at(self, k: int) -> str:
        return gbnf_literal(f"{self.first_id + k}. join()\n{END_OF_PLAN}")

    def rule(self, k: int) -> str:
        """Line `k` and the rest ('' if it cannot be written)."""
        if k in self._made:
            return self._made[k]
        options = [self.join_at(k)] if k or not any(self.lines) else []
        if k < len(self.lines) and self.lines[k]:
            after = self.rule(k + 1)
            if after:
                head = gbnf_literal(f"{self.first_id + k}. ")
                options.append(f'{head} {_alt(self.lines[k].values())} "\\n" {after}')
        body = " | ".join(options)
        hint = f"line-{self.first_id + k}"
        made = (
            self.rules.add(hint, f"{self.thought}({body})" if self.thought else body)
            if body
            else ""
        )
        self._made[k] = made
        return made


def joiner_grammar(
    *,
    allow_replan: bool = True,
    thought_label: bool = True,
    numbers: Sequence[str] | None = None,
    anchors: Sequence[str] = (),
) -> str:
    """GBNF for the joiner: ``Thought: ...`` then ``Action: Finish(answer)`` or ``Replan(...)``.

    The answer is one line whose parentheses balance; the ``)`` that closes
    ``Finish(`` ends the output (the model can then only stop).

    Args:
        allow_replan: False on the last round: only ``Finish`` is allowed.
        thought_label: False when the prompt already ends with ``Thought:`` (completion
            models), so the output starts with the thought itself.
        numbers: If given, a grounded answer: its digits can only spell these numbers
            (each one whole: ``4806`` cannot become ``48061``), and it states one of
            `anchors` or says it ``could not find`` what was asked (see
            :func:`_grounded_answer`).
        anchors: Values from the observations (numbers, names); none: the answer
            starts with "I could not find".
    """
    start = '"Thought: "' if thought_label else '" "?'
    actions = '"Finish(" answer ")"' + (' | "Replan(" free ")"' if allow_replan else "")
    text = f'root ::= {start} [^\\n]+ "\\nAction: " ({actions})\n'
    text += 'free ::= ([^()\\n] | "(" free? ")")+\n'
    if numbers is None:
        return text + "answer ::= free\n"
    return text + _grounded_answer(numbers, anchors)


#: Most characters of a grounded answer before it states a value, and after it.
ANSWER_LEAD, ANSWER_TAIL = 60, 160


def _grounded_answer(numbers: Sequence[str], anchors: Sequence[str]) -> str:
    """The rules of an answer that writes only `numbers` and states an anchor.

    Bounded: within ``ANSWER_LEAD`` characters it states an anchor (else a small model
    may write on and never close), and it ends ``ANSWER_TAIL`` characters later. With
    no anchors (nothing was found) it starts with "I could not find".
    """
    nums = list(dict.fromkeys(n for n in numbers if n))
    said = list(dict.fromkeys(a for a in anchors if a))
    rules = [
        "ch ::= [^()\\n0-9]",
        'unit ::= ch | "(" inner ")"' + (" | num ch" if nums else ""),
        "inner ::= " + ("(ch | num ch){0,60} num?" if nums else "ch{0,60}"),
        f"tail ::= (ch unit{{0,{ANSWER_TAIL}}}" + (" num?" if nums else "") + ")?",
    ]
    if nums:
        rules.append("num ::= " + " | ".join(gbnf_literal(n) for n in nums))
    if not said:
        return "\n".join([*rules, f'answer ::= "I {NOT_FOUND}" tail']) + "\n"
    values = [*(gbnf_literal(a) for a in said), f'"{NOT_FOUND}"', f'"{NOT_FOUND.capitalize()}"']
    rules += [
        f"answer ::= unit{{0,{ANSWER_LEAD}}} anchor",
        "anchor ::= (" + " | ".join(values) + ") tail",
    ]
    return "\n".join(rules) + "\n"


# --------------------------------------------------------------------------- JSON plans

REF_PATTERN = "^[$][0-9]+$"  # a backslash-escaped $ becomes bad GBNF in llama-cpp-python
_REF_SCHEMA = {"type": "string", "pattern": REF_PATTERN, "description": "$N: result of task N"}
_SCALARS = [{"type": t} for t in ("string", "number", "boolean", "null")]


def json_plan_schema(tools: Sequence[Any], *, max_tasks: int | None = None) -> dict[str, Any]:
    """A JSON Schema for a plan as JSON, valid in OpenAI's strict structured-output mode.

    The plan is ``{"thought": str, "tasks": [{"id": int, "tool": name, "args": {...}}]}``
    with tasks in id order; the end of the array is the ``join()``. Each task's ``args``
    has every parameter of its tool (strict mode requires all properties): an optional
    one is null when not given. A reference is the string ``"$N"``, allowed for any value
    (also inside strings, as in the text format). Strict mode has no "any" type: untyped
    values are scalars, and free-form objects are JSON text in a string.

    Args:
        tools: The tools the plan may call.
        max_tasks: Bound on the number of tasks (``maxItems``), if given.
    """
    specs = tool_specs(tools)
    if not specs:
        raise ValueError("A plan schema needs at least one tool.")
    tasks: dict[str, Any] = {"type": "array", "items": {"anyOf": [_task(s) for s in specs]}}
    if max_tasks is not None:
        tasks["maxItems"] = max_tasks
    return _object({"thought": {"type": "string"}, "tasks": tasks})


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _task(spec: ToolSpec) -> dict[str, Any]:
    args = {p.name: _with_ref(_strict(p.schema), nullable=not p.required) for p in spec.params}
    tool = {"type": "string", "enum": [spec.name]}
    return _object({"id": {"type": "integer"}, "tool": tool, "args": _object(args)})


def _strict(schema: Mapping[str, Any], depth: int = 0) -> dict[str, Any]:  # noqa: C901
    """`schema` in the subset strict mode accepts, references allowed inside."""
    note = {"description": schema["description"]} if "description" in schema else {}
    if "const" in schema:
        return {"enum": [schema["const"]], **note}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return {"enum": list(schema["enum"]), **note}
    branches = alternatives(schema)
    if branches is not None:
        return {"anyOf": _flat([_strict(b, depth + 1) for b in branches]), **note}
    kind = schema.get("type")
    if kind in ("string", "integer", "number", "boolean", "null"):
        return {"type": kind, **note}
    if kind == "array" and depth < 8:
        items = schema.get("items")
        item = _strict(items if isinstance(items, Mapping) else {}, depth + 1)
        return {"type": "array", "items": _with_ref(item), **note}
    if kind == "object" and schema.get("properties") and depth < 8:
        required = set(schema.get("required", ()))
        props = {
            k: _with_ref(_strict(v, depth + 1), nullable=k not in required)
            for k, v in schema["properties"].items()
        }
        return {**_object(props), **note}
    if kind == "object":
        return {"type": "string", "description": "a JSON object, as text"}
    return {"anyOf": [dict(s) for s in _SCALARS], **note}


def _flat(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for o in options:
        for item in o["anyOf"] if set(o) <= {"anyOf", "description"} and "anyOf" in o else [o]:
            if item not in out:
                out.append(item)
    return out


def _with_ref(schema: dict[str, Any], *, nullable: bool = False) -> dict[str, Any]:
    """`schema`, or a ``"$N"`` reference (needless for a plain string), or null if allowed."""
    options = [schema]
    if schema.get("type") != "string" or "enum" in schema:
        options.append(dict(_REF_SCHEMA))
    if nullable:
        options.append({"type": "null"})
    if len(options) == 1:
        return schema
    return {"anyOf": _flat(options)}


def json_plan_text(plan: Mapping[str, Any]) -> str:
    """A JSON plan (see :func:`json_plan_schema`) as plan text for PlanParser.

    Each task becomes a JSON line ``N. {"tool": {args}}`` (null arguments left out, so
    the tool's default applies), then ``join()`` and ``<END_OF_PLAN>``.

    Raises:
        ValueError: The plan is not an object with a ``tasks`` list of task objects.
    """
    tasks = plan.get("tasks") if isinstance(plan, Mapping) else None
    if not isinstance(tasks, list):
        raise ValueError('A JSON plan must be an object with a "tasks" list.')
    lines = []
    thought = plan.get("thought")
    if isinstance(thought, str) and thought.strip():
        lines.append("Thought: " + " ".join(thought.split()))
    last = 0
    for task in tasks:
        if not isinstance(task, Mapping) or not isinstance(task.get("id"), int):
            raise ValueError(f"A JSON plan task must be an object with an integer id: {task!r}")
        args = task.get("args", {})
        if not isinstance(args, Mapping):
            raise ValueError(f"Task {task['id']}: args must be an object.")
        call = {str(task.get("tool")): {k: v for k, v in args.items() if v is not None}}
        lines.append(f"{task['id']}. {json.dumps(call, ensure_ascii=False)}")
        last = max(last, task["id"])
    lines.append(f"{last + 1}. join()")
    return "\n".join(lines) + "\n" + END_OF_PLAN
