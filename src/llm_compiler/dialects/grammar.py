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

Not constrained: ``$N`` written inside a string (a template), string ``pattern`` and
``format``, numeric bounds and ``minItems``/``maxItems``. Parameter names are the
schema's, which are aliases for pydantic fields that have them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
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
#: A string that, if it starts with a capital letter, starts with a whole name. (Letting
#: codes such as ``USD`` start freely let the model, denied ``Dauphin``, write ``DNR``;
#: letting a name run on, ``Rhineland``.)
_NAME_STR = (
    r'"\"" (name-lit ([^"\\a-zA-Z0-9\x00-\x1F\x7F] str-char{0,MAX_REST})? '
    r'| [^"\\A-Z\x00-\x1F\x7F] str-char{0,MAX_REST} '
    r'| "\\" (["\\nrt] | "u" [0-9a-fA-F]{4}) str-char{0,MAX_REST})? "\""'
)
_TERMINALS = _TERMINALS.replace("MAX_STRING", str(MAX_STRING))
_NAME_STR = _NAME_STR.replace("MAX_REST", str(MAX_STRING - 1))
#: An arithmetic expression's string: no capital letter (``"MSFT - AAPL"`` names, it does
#: not compute; functions such as ``sqrt`` and references ``$1`` stay).
_EXPR_STR = r'"\"" ([^"\\A-Z\x00-\x1F\x7F] | "\\" ["\\nrt])* "\""'
#: Most characters between the references of an expression (a model denied the
#: references it copies may otherwise write digits until its token budget ends).
MAX_EXPRESSION_RUN = 60
#: Numbers an expression may always write (``"($1 - $2) / 2"``, ``"$1 * 100"``).
SMALL_NUMBERS = ("0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "100", "1000")
_RESERVED = ("root", "str", "str-char", "int", "num", "thought", "name-str", "name-lit", "expr-str")
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


class _Rules:
    """GBNF rules by name; identical bodies share one rule.

    `string` is the rule of a string value: ``str``, or one whose capitalized start
    must be one of the given names (see :func:`plan_grammar`).
    """

    def __init__(self, names: Sequence[str] = ()) -> None:
        self.rules: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self.string = "str"
        self._name_list = list(names)
        self.expression_numbers: Sequence[str] | None = None
        self.small_numbers = True
        self.operands: Sequence[str] = ()
        self.operand_count = 0
        if names:
            self.string = "name-str"
            self.rules["name-str"] = _NAME_STR
            self.rules["name-lit"] = " | ".join(
                gbnf_literal(json.dumps(n, ensure_ascii=False)[1:-1]) for n in names
            )

    def string_except(self, values: Sequence[str]) -> str | None:
        """A string rule that cannot be any of `values` (None if it cannot say so:
        without names, or for a value that starts with no capital letter)."""
        if self.string != "name-str" or not all(v[:1].isupper() for v in values):
            return None
        # Nor a shorter name the value starts with: "Leonardo" would run on as
        # "Leonardo da Vinci".
        names = [
            n
            for n in self._name_list
            if not any(v == n or re.match(re.escape(n) + r"[^\w]", v) for v in values)
        ]
        if not names:  # only text that starts with no capital letter
            rule = rf'"\"" ([^"\\A-Z\x00-\x1F\x7F] str-char{{0,{MAX_STRING - 1}}})? "\""'
            return self.add("str-lower", rule)
        lits = " | ".join(gbnf_literal(json.dumps(n, ensure_ascii=False)[1:-1]) for n in names)
        lit = self.add("name-lit-except", lits)
        return self.add("name-str-except", _NAME_STR.replace("name-lit", lit))

    def expression(self, without: str = "", refs: Sequence[int] | None = None) -> str:
        """The rule of an arithmetic expression's string (`without` these characters).

        With `refs`, a ``$N`` inside it names one of them (``"$1 - $2"`` on a replan
        cannot name a task that failed), and not one named before in it; else ``$`` is
        free. With `operands` set, only their chains (:meth:`_operands_expression`).
        """
        excluded = "".join(f"\\x{ord(c):02X}" for c in without)
        if self.operands:
            return self._operands_expression(without)
        if refs is None:
            self.rules.setdefault("expr-str", _EXPR_STR.replace("A-Z", "A-Z" + excluded))
            return "expr-str"
        plain = f'[^"\\\\$A-Z{excluded}\\x00-\\x1F\\x7F]'
        item = f'({plain} | "\\\\" ["\\\\nrt]){{0,{MAX_EXPRESSION_RUN}}}'
        after = plain.replace("A-Z", "A-Z0-9")  # no digit after $N: "$12" is not "$1"
        if self.expression_numbers is not None:  # each number whole, one of them
            small = SMALL_NUMBERS if self.small_numbers else ()
            forms = [*dict.fromkeys([*self.expression_numbers, *small])]
            number = self.add("expr-num", " | ".join(gbnf_literal(n) for n in forms))
            unit = f'({after} | "\\\\" ["\\\\nrt] | {number} {after})'
            item = f"{unit}{{0,{MAX_EXPRESSION_RUN}}} {number}?"
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

    def _operands_expression(self, without: str) -> str:
        """Each ordered choice of ``operand_count`` different `operands`, joined by
        an operator not in `without` (``"36000 + 183000"``)."""
        ops = _alt(gbnf_literal(f" {o} ") for o in "+-*/" if o not in without) or '" + "'
        items = [gbnf_literal(o) for o in self.operands]

        def chains(left: list[int], n: int) -> str:
            if n == 0:
                return ""
            return _alt(
                f"{items[i]} {ops} {rest}".strip()
                if (rest := chains(left[:k] + left[k + 1 :], n - 1))
                else items[i]
                for k, i in enumerate(left)
            )

        body = chains(list(range(len(items))), self.operand_count)
        return self.add("expr-operands", f'"\\"" {body} "\\""')

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
    unique = list(dict.fromkeys(o for o in options if o))
    return unique[0] if len(unique) == 1 else "(" + " | ".join(unique) + ")"


class _Values:
    """Value rules for one plan line: typed values in one dialect, references allowed."""

    def __init__(self, rules: _Rules, dialect: str, ref_ids: Sequence[int], tag: str) -> None:
        self.rules, self.dialect, self.tag = rules, dialect, tag
        self.words = _DIALECTS[dialect]
        self.ref_ids = sorted(ref_ids)
        self._ref: str | None = None

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
        """An expression for a value of `schema` or a reference."""
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
            return self.rules.string
        if kind == "integer":
            return "int"
        if kind == "number":
            return "num"
        if kind == "boolean":
            return f"({gbnf_literal(self.words['true'])} | {gbnf_literal(self.words['false'])})"
        if kind == "null":
            return gbnf_literal(self.words["null"])
        if kind == "array" and depth < 8:
            items = schema.get("items")
            item = self.value(
                items if isinstance(items, Mapping) else {}, hint + "-item", depth + 1
            )
            body = f'"[" ({item} (", " {item})*)? "]"'
            return self.rules.add(f"{hint}-list-{self.dialect}-{self.tag}", body)
        if kind == "object" and schema.get("properties") and depth < 8:
            return self.record(schema, hint, depth)
        return self.any()

    def record(self, schema: Mapping[str, Any], hint: str, depth: int) -> str:
        required = set(schema.get("required", ()))
        items = [
            (f"{gbnf_literal(json.dumps(k) + ': ')} {self.value(v, f'{hint}-{k}', depth + 1)}", k)
            for k, v in schema["properties"].items()
        ]
        chain = _first(self.rules, [(e, k in required) for e, k in items], f"{hint}-{self.tag}")
        return self.rules.add(f"{hint}-obj-{self.dialect}-{self.tag}", f'"{{" {chain} "}}"')

    def any(self) -> str:
        """Any JSON-ish value (recursive), references included."""
        name = f"any-{self.dialect}-{self.tag}"
        if name not in self.rules.rules:
            w = self.words
            scalars = " | ".join(["str", "num"] + [gbnf_literal(w[k]) for k in w if k != "ref"])
            self.rules.rules[name] = (
                f"{self.ref + ' | ' if self.ref else ''}{scalars}"
                f' | "[" ({name} (", " {name})*)? "]"'
                f' | "{{" (str ": " {name} (", " str ": " {name})*)? "}}"'
            )
        return name


def _tail(rules: _Rules, items: list[tuple[str, bool]], hint: str, i: int = 0) -> str:
    """Items `i`.. in order, each written as ``, item``; optional ones may be left out."""
    if i >= len(items):
        return ""
    expr, required = items[i]
    rest = _tail(rules, items, hint, i + 1)
    head = f'", " {expr}' if required else f'(", " {expr})?'
    return rules.add(f"{hint}-tail{i}", f"{head} {rest}".strip())


def _first(rules: _Rules, items: list[tuple[str, bool]], hint: str, i: int = 0) -> str:
    """Items `i`.. in order, comma-separated, without a comma before the first one."""
    if i >= len(items):
        return ""
    expr, required = items[i]
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
            return ""
        tail = _tail(rules, kw, hint, i)
        more = f'", " {values[i]} {after(i + 1)}'.strip()
        return rules.add(f"{hint}-pos{i}", f"{more} | {tail}" if tail else f"({more})?")

    if not values:
        return ""
    first = _first(rules, kw, hint)
    return rules.add(f"{hint}-args", f"{values[0]} {after(1)}".strip() + f" | {first}")


def _tool_call(
    rules: _Rules,
    spec: ToolSpec,
    index: int,
    values: dict[str, _Values],
    compute: str | None = None,
    exclude: Sequence[tuple[Any, ...]] = (),
    suggest: Mapping[tuple[Any, ...], Sequence[Any]] | None = None,
    narrow: Mapping[str, Sequence[Any]] | None = None,
    texts: Iterable[int] = (),
) -> str:
    """One tool's call on one line, in call form or JSON form (`compute`: its string
    arguments are arithmetic without these characters, see ``_EXPR_STR``, naming no
    task of `texts`; `exclude`: the required arguments' values of calls it may not
    repeat; `suggest`, `narrow`: see :func:`plan_grammar`)."""
    hint = f"t{index}-{spec.name}-{values['py'].tag}"
    if spec.call_form and exclude and compute is None:
        excluding = _excluding_call(rules, spec, index, values["py"], exclude, hint, suggest)
        if excluding is not None:
            return excluding
    schemas = [
        {**p.schema, "enum": list(narrow[p.name])} if narrow and p.name in narrow else p.schema
        for p in spec.params
    ]
    if spec.call_form:
        v = values["py"]
        unnamed = set(texts)
        refs = [i for i in v.ref_ids if i not in unnamed]
        typed = [
            _alt([v.ref, rules.expression(compute, refs)])
            if compute is not None and p.schema.get("type") == "string"
            else v.value(schema, f"t{index}-{p.name}")
            for p, schema in zip(spec.params, schemas, strict=True)
        ]
        kw = [
            (f"{gbnf_literal(p.name + '=')} {e}", p.required)
            for p, e in zip(spec.params, typed, strict=True)
        ]
        args = _positional(rules, typed, kw, hint)
        body = f"{gbnf_literal(spec.name + '(')} {args} {gbnf_literal(')')}".replace("  ", " ")
    else:
        v = values["json"]
        kw = [
            (f"{gbnf_literal(json.dumps(p.name) + ': ')} {v.value(schema, f't{index}-{p.name}')}",
             p.required)
            for p, schema in zip(spec.params, schemas, strict=True)
        ]  # fmt: skip
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
    """A call with its required arguments, positional, that is none of `exclude`.

    Each tuple holds a failed call's required values in order. Written as a tree: at
    each argument, one of the failed calls' values (then the rest must differ) or a
    value none of them has (then any rest). A string differs by its name
    (:meth:`_Rules.string_except`), an enum by its other values (only those `suggest`
    gives for the values before it, if it gives some); None if an argument cannot be
    told apart (a number), or the tool has optional arguments only.
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
        if differ:
            options.append(f"{sep}{_alt([v.ref, differ])} {general(i + 1)}".strip())
        if not options:
            return None
        return rules.add(f"{hint}-x{i}", " | ".join(options))

    try:
        args = tree(0, failed)
    except _CannotExclude:
        return None
    if args is None:
        return None
    body = f"{gbnf_literal(spec.name + '(')} {args} {gbnf_literal(')')}"
    return rules.add(hint, body)


def _other_value(
    rules: _Rules, v: _Values, schema: Mapping[str, Any], taken: list[Any]
) -> str | None:
    """A value of `schema` none of `taken` ('' if there is none; None if a grammar
    cannot tell: only enums and names can be told apart)."""
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        rest = [x for x in schema["enum"] if x not in taken]
        return _alt(v.lit(x) for x in rest) if rest else ""
    if schema.get("type") == "string" and all(isinstance(x, str) for x in taken):
        return rules.string_except(taken)
    return None


class _CannotExclude(Exception):
    """An argument of a failed call that a grammar cannot tell apart from others."""


def _without(spec: ToolSpec, compute: str | None, without: str) -> str | None:
    return without if spec.name == compute else None


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
    names: Sequence[str] = (),
    require: str | None = None,
    avoid: Iterable[str] = (),
    compute: str | None = None,
    compute_without: str = "",
    exclude: Mapping[str, Sequence[tuple[Any, ...]]] | None = None,
    compute_numbers: Sequence[str] | None = None,
    suggest: Mapping[str, Mapping[tuple[Any, ...], Sequence[Any]]] | None = None,
    narrow: Mapping[str, Mapping[str, Sequence[Any]]] | None = None,
    compute_texts: Iterable[int] = (),
    compute_small: bool = True,
    compute_operands: tuple[Sequence[str], int] = ((), 0),
) -> str:
    """GBNF for a plan over `tools` (BaseTools or callables), numbered from `first_id`.

    Args:
        tools: The tools the plan may call.
        first_id: The number of the first line (on a replan, the next free task id).
        max_tasks: Most tool calls before ``join()`` is forced.
        known_ids: Ids of earlier rounds' tasks, which ``$N`` may also name.
        allow_thoughts: Allow a ``Thought: ...`` line before each numbered line.
        names: Names a string argument can copy (from the question and what earlier
            rounds found): a string that starts with a capital letter (``"Danube"``,
            ``"USD"``, not ``"the Danube"``) starts with one of them, so a small model
            copies ``Danube`` instead of retyping it as ``Dauphin``. Other strings are
            free. None given: every string is free.
        require: A tool the plan must call before ``join()`` (the calculator, for a
            question that compares quantities); ignored if it is not among `tools`.
        avoid: Tools not called before `require`'s call (tools of text results, whose
            results a calculator cannot read).
        compute: A tool that evaluates arithmetic (the calculator): its string
            arguments have no capital letters (``"$1 - $2"``, ``"8849 - 8611"``, never
            ``"MSFT - AAPL"``, which names what it should compute on).
        compute_without: Characters `compute`'s expressions do not use (``-`` for a
            question that adds up: a small model copies the examples' ``"$1 - $2"``).
        exclude: Calls a replan may not write again, by tool: the values of each
            failed call's required arguments, in order (``{"lookup": [("Yangtze",
            "height_m")]}``). Such a tool is then called with its required arguments,
            positional; a tool whose failed values cannot be told apart (numbers)
            keeps its usual call.
        compute_numbers: If given, the numbers `compute`'s expressions may write (each
            whole), besides ``SMALL_NUMBERS`` and references: those of the question and
            of what earlier rounds found. A small model otherwise copies the
            calculator's docstring example (``"(8849 - 8611) / 2"``) into a plan about
            share prices.
        suggest: For a call `exclude` constrains, by tool and by the values of its
            other required arguments: the only values its last required argument, an
            enum, may then take (those a failure named: "known fields: birth_year,
            death_year"). ``{"lookup": {("Leonardo da Vinci",): ["birth_year",
            "death_year"]}}``.
        narrow: The only values an enum argument may take, by tool and argument
            (``{"lookup": {"field": ["birth_year"]}}``: the field a question comparing
            two people's births names), where `exclude` does not constrain the call.
        compute_texts: Earlier tasks whose results are texts: `compute`'s expressions
            do not name them (a calculator cannot read a profile; it writes the
            numbers, which `compute_numbers` lists).
        compute_small: Whether `compute_numbers` adds ``SMALL_NUMBERS`` (not when the
            numbers to compute on were found: ``"1 + 2"`` then only copies ``"$1 + $2"``).

    Returns:
        The grammar text (root rule ``root``).
    """
    specs = tool_specs(tools)
    if not specs:
        raise ValueError("A plan grammar needs at least one tool.")
    if max_tasks < 1 or first_id < 1:
        raise ValueError("max_tasks and first_id must be at least 1.")
    rules, known, avoid = _Rules(names), sorted(set(known_ids)), set(avoid)
    rules.expression_numbers = compute_numbers
    rules.small_numbers = compute_small
    rules.operands, rules.operand_count = compute_operands
    thought = "thought? " if allow_thoughts else ""
    lines: list[tuple[int, str, str, str]] = []  # id, any call, the required tool's, others'
    for k in range(max_tasks):
        task_id = first_id + k
        refs = [i for i in known if i < first_id] + list(range(first_id, task_id))
        values = {d: _Values(rules, d, refs, f"l{k + 1}") for d in _DIALECTS}
        calls = [
            (
                s.name == require,
                _tool_call(
                    rules,
                    s,
                    n,
                    values,
                    _without(s, compute, compute_without),
                    (exclude or {}).get(s.name, ()),
                    (suggest or {}).get(s.name),
                    (narrow or {}).get(s.name),
                    compute_texts,
                ),
            )
            for n, s in enumerate(specs)
        ]
        any_call = rules.add(f"call-l{k + 1}", " | ".join(c for _, c in calls))
        calls = [(r, c) for (r, c), s in zip(calls, specs, strict=True) if s.name not in avoid]
        need, other = (
            rules.add(f"{hint}-l{k + 1}", chosen)
            if (chosen := " | ".join(c for r, c in calls if r is wanted))
            else ""
            for wanted, hint in ((True, "need"), (False, "other"))
        )
        lines.append((task_id, any_call, need, other))

    def join_at(task_id: int) -> str:
        return gbnf_literal(f"{task_id}. join()\n{END_OF_PLAN}")

    def line(task_id: int, body: str, hint: str = "line") -> str:
        return rules.add(f"{hint}-{task_id}", f"{thought}({body})" if thought else body)

    end_id = first_id + max_tasks
    done = rules.add(f"join-{end_id}", f"{thought}{join_at(end_id)}")
    todo = "" if require and require in {s.name for s in specs} else None
    for task_id, call, need, other in reversed(lines):
        head = gbnf_literal(f"{task_id}. ")
        if todo is not None:  # lines before the required tool's call: no join yet
            body = f'{head} ({need} "\\n" {done}' + (
                f' | {other} "\\n" {todo})' if todo and other else ")"
            )
            todo = line(task_id, body, "todo")
        body = f'{head} {call} "\\n" {done}'
        if task_id > first_id:  # a plan has at least one task
            body = f"{join_at(task_id)} | {body}"
        done = line(task_id, body)
    return rules.render(todo or done)


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
