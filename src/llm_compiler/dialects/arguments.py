"""Call arguments as models write them, parsed safely into JSON-safe values with references.

Shared by every plan dialect. Arguments are parsed with :mod:`ast` and JSON only;
nothing the model writes is ever executed. ``$N``/``${N}`` name the result of task N;
a reference becomes ``{"$ref": N}`` (see :mod:`llm_compiler.plan`). A dialect with named
results (Chain-of-Abstraction's ``y1``) passes ``names`` instead: a bare name, a string
that is just the name, or the name as a whole word inside a string is a reference.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from llm_compiler.errors import LLMCompilerError
from llm_compiler.plan import CONCAT, PlanError, PlanErrorKind, literal, ref

_WHOLE_REF = re.compile(r"^\$(?:\{(\d+)\}|(\d+))$")
# `$1` must not match inside `$10`, nor be the start of a number such as `$1.5` or `$1,000`.
_TEXT_REF = re.compile(r"\$\{(\d+)\}|\$(\d+)(?![\d])(?![.,]\d)")
_BARE_REF = re.compile(r"\$\{(\d+)\}|\$(\d+)(?![\d])")
_PLACEHOLDER = re.compile(r"^__ref_(\d+)__$")


class PlanLineError(LLMCompilerError, ValueError):
    """A plan line that cannot become a runnable task; `kind` says why."""

    def __init__(self, message: str, kind: PlanErrorKind) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def error(self) -> PlanError:
        """The task's error: this message, with its kind."""
        return PlanError(str(self), self.kind)


# --------------------------------------------------------------------------- scanning


_PAIRS = {"(": ")", "[": "]", "{": "}"}


class ParenScanner:
    """Finds the ``)`` that closes an already-open call, skipping string literals.

    Incremental: ``scan`` may be called with successive pieces of the text; the brackets
    and the string literal still open carry over.
    """

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.quote: str | None = None
        self.escaped = False

    def scan(self, piece: str, start: int = 0) -> int:
        """The index in `piece` of the closing ``)``, or -1 (scanning continues later)."""
        stack, quote, escaped = self.stack, self.quote, self.escaped
        found = -1
        for i in range(start, len(piece)):
            ch = piece[i]
            if quote:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == quote:
                    quote = None
            elif ch in "\"'":
                quote = ch
            elif ch in _PAIRS:
                stack.append(_PAIRS[ch])
            elif ch in ")]}":
                if not stack:
                    if ch == ")":
                        found = i
                        break
                elif stack[-1] == ch:
                    stack.pop()
        self.quote, self.escaped = quote, escaped
        return found


def find_closing_paren(text: str) -> tuple[int | None, list[str]]:
    """Find the ``)`` that closes an already-open call, skipping string literals.

    Returns the index of that parenthesis (or None) and the brackets still open at the
    end of `text` when there is none.
    """
    scanner = ParenScanner()
    close = scanner.scan(text)
    return (close, []) if close >= 0 else (None, scanner.stack)


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting in `text` outside string literals (a linear scan)."""
    depth = deepest = 0
    quote: str | None = None
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}" and depth:
            depth -= 1
    return deepest


def _replace_bare_refs(text: str) -> str:
    """Turn ``$3``/``${3}`` written outside string literals into placeholder names."""
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            out.append(ch)
            if ch == "\\" and i + 1 < len(text):
                out.append(text[i + 1])
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            out.append(ch)
        elif ch == "$":
            m = _BARE_REF.match(text, i)
            if m:
                out.append(f"__ref_{m.group(1) or m.group(2)}__")
                i = m.end()
                continue
            out.append(ch)
        else:
            out.append(ch)
        i += 1
    return "".join(out)


# --------------------------------------------------------------------------- arguments


class _Converter:
    """Turns an argument AST into JSON-safe values with references."""

    def __init__(
        self,
        own_id: int,
        earlier: set[int],
        source: str,
        alias: dict[int, int] | None = None,
        written_id: int | None = None,
        names: Mapping[str, int] | None = None,
        dollar_refs: bool = True,
    ) -> None:
        self.own_id = own_id
        self.earlier = earlier
        self.source = source
        self.alias = alias or {}
        self.written_id = own_id if written_id is None else written_id
        self.names = dict(names or {})
        self.dollar_refs = dollar_refs
        # Longest first, and whole words only: `y1` never matches inside `y10` or `y1a`.
        words = "|".join(re.escape(n) for n in sorted(self.names, key=len, reverse=True))
        self.name_ref = re.compile(rf"(?<![\w$])(?:{words})(?!\w)") if words else None

    def is_ref(self, n: int, explicit: bool) -> int | None:
        """The task id `$n` refers to, or None when it is just text."""
        if n == self.written_id:
            raise PlanLineError(f"Task {self.own_id} references itself (${n}).", "bad_reference")
        if n in self.alias:
            return self.alias[n]
        if n in self.earlier:
            return n
        if explicit:
            raise PlanLineError(
                f"Task {self.own_id} references task {n}, which is not an earlier task.",
                "bad_reference",
            )
        return None

    def text(self, s: str, explicit: bool = False) -> Any:
        """A string literal: a whole reference, a template, or plain text."""
        if s.strip() in self.names:
            return ref(self.names[s.strip()])
        whole = _WHOLE_REF.match(s.strip()) if self.dollar_refs else None
        if whole:
            n = int(whole.group(1) or whole.group(2))
            target = self.is_ref(n, explicit or whole.group(1) is not None)
            return s if target is None else ref(target)
        parts: list[Any] = []
        pos = 0
        for start, end, target in self._text_refs(s, explicit):
            parts.append(s[pos:start])
            parts.append(ref(target))
            pos = end
        if not parts:
            return s
        parts.append(s[pos:])
        return _concat(parts)

    def _text_refs(self, s: str, explicit: bool) -> list[tuple[int, int, int]]:
        """(start, end, task id) of each reference inside `s`, in order."""
        found: list[tuple[int, int, int]] = []
        if self.dollar_refs:
            for m in _TEXT_REF.finditer(s):
                target = self.is_ref(int(m.group(1) or m.group(2)), explicit or bool(m.group(1)))
                if target is not None:
                    found.append((m.start(), m.end(), target))
        if self.name_ref is not None:
            for m in self.name_ref.finditer(s):
                found.append((m.start(), m.end(), self.names[m.group()]))
        return sorted(found)

    def node(self, node: ast.AST) -> Any:  # noqa: C901 - one branch per node kind
        if isinstance(node, ast.Constant):
            if isinstance(node.value, str):
                return self.text(node.value)
            if isinstance(node.value, (int, float, bool)) or node.value is None:
                return node.value
            return self.source_text(node)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self.node(e) for e in node.elts]
        if isinstance(node, ast.Dict):
            out: dict[str, Any] = {}
            for k, v in zip(node.keys, node.values, strict=True):
                key = self.node(k) if k is not None else None
                if not isinstance(key, (str, int, float, bool)):
                    return self.source_text(node)
                out[str(key)] = self.node(v)
            return literal(out)
        if (
            isinstance(node, ast.UnaryOp)
            and isinstance(node.op, (ast.USub, ast.UAdd))
            and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))
            and not isinstance(node.operand.value, bool)
        ):
            number = node.operand.value
            return -number if isinstance(node.op, ast.USub) else number
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return ref(self.names[node.id])
            m = _PLACEHOLDER.match(node.id)
            if m:
                target = self.is_ref(int(m.group(1)), explicit=True)
                assert target is not None  # explicit references raise instead
                return ref(target)
            return node.id  # a bare word: search(Rosetta)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.node(node.left), self.node(node.right)
            if _stringish(left) or _stringish(right):
                return _concat([left, right])
        return self.source_text(node)

    def source_text(self, node: ast.AST) -> Any:
        """An expression we do not evaluate: pass its source as text."""
        seg = ast.get_source_segment(self.source, node) or ""
        seg = re.sub(r"__ref_(\d+)__", r"${\1}", seg)
        return self.text(seg)


def _stringish(v: Any) -> bool:
    return isinstance(v, str) or (isinstance(v, dict) and CONCAT in v)


def _concat(parts: Iterable[Any]) -> Any:
    flat: list[Any] = []
    for p in parts:
        items = p[CONCAT] if isinstance(p, dict) and CONCAT in p else [p]
        for item in items:
            if isinstance(item, (int, float)) and not isinstance(item, bool):
                item = str(item)
            if isinstance(item, str) and flat and isinstance(flat[-1], str):
                flat[-1] += item
            elif item != "":
                flat.append(item)
    if not flat:
        return ""
    if len(flat) == 1 and isinstance(flat[0], str):
        return flat[0]
    return {CONCAT: flat}


def parse_arguments(
    text: str,
    *,
    own_id: int,
    earlier: Iterable[int],
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
    names: Mapping[str, int] | None = None,
    dollar_refs: bool = True,
) -> tuple[list[Any], dict[str, Any]]:
    """Parse the inside of ``tool(...)`` into positional and keyword arguments.

    Accepts Python-literal syntax, unquoted text (``search(In Cold Blood)``), and
    ``$N``/``${N}`` references anywhere. `alias` maps ids as the planner wrote them to
    the ids they were renumbered to (`written_id` is this task's). `names` maps result
    names (``y1``) to task ids; `dollar_refs=False` leaves ``$N`` as plain text (for
    dialects that do not use it, where ``$5`` is an amount). Raises PlanLineError for
    invalid references and for arguments too deep or too large to read (an attribute
    chain thousands long, a 5,000-digit number): never anything else.
    """
    try:
        return _parse_arguments(text, own_id, earlier, alias, written_id, names, dollar_refs)
    except (RecursionError, MemoryError, ValueError) as e:
        if isinstance(e, PlanLineError):
            raise
        kind = "too deep" if isinstance(e, RecursionError) else "too large"
        raise PlanLineError(f"Task {own_id}'s arguments are {kind} to read.", "too_large") from None


def _parse_arguments(
    text: str,
    own_id: int,
    earlier: Iterable[int],
    alias: dict[int, int] | None,
    written_id: int | None,
    names: Mapping[str, int] | None,
    dollar_refs: bool,
) -> tuple[list[Any], dict[str, Any]]:
    conv = _Converter(own_id, set(earlier), "", alias, written_id, names, dollar_refs)
    if not text.strip():
        return [], {}
    prepared = _replace_bare_refs(text) if dollar_refs else text
    source = f"_f({prepared})"
    try:
        call = ast.parse(source, mode="eval").body
    except SyntaxError:
        # Unquoted free text (the original few-shot plans do this): one string argument.
        return [conv.text(_strip_quotes(text.strip()))], {}
    assert isinstance(call, ast.Call)
    conv.source = source
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
        raise PlanLineError(
            "Star arguments (*args, **kwargs) are not supported in a plan.", "bad_arguments"
        )
    args = [conv.node(a) for a in call.args]
    kwargs = {k.arg: conv.node(k.value) for k in call.keywords if k.arg}
    return args, kwargs


def _strip_quotes(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        return s[1:-1]
    return s


def _json_value(conv: _Converter, value: Any) -> Any:
    if isinstance(value, str):
        return conv.text(value)
    if isinstance(value, list):
        return [_json_value(conv, v) for v in value]
    if isinstance(value, dict):
        return literal({str(k): _json_value(conv, v) for k, v in value.items()})
    return value


def parse_json_call(
    body: str,
    task_id: int,
    earlier: set[int],
    alias: dict[int, int] | None = None,
    written_id: int | None = None,
) -> tuple[str, list[Any], dict[str, Any]]:
    try:
        obj, _ = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError as e:
        raise PlanLineError(f"Task {task_id} is not valid JSON: {e.msg}.", "not_a_call") from None
    conv = _Converter(task_id, earlier, "", alias, written_id)
    if isinstance(obj, dict) and "tool" in obj and isinstance(obj["tool"], str):
        name, payload = obj["tool"], obj.get("args", obj.get("arguments", {}))
    elif isinstance(obj, dict) and len(obj) == 1:
        name, payload = next(iter(obj.items()))
    else:
        raise PlanLineError(
            f'Task {task_id} must be {{"tool_name": {{"arg": value}}}}.', "not_a_call"
        )
    if isinstance(payload, dict):
        return name, [], {str(k): _json_value(conv, v) for k, v in payload.items()}
    if isinstance(payload, list):
        return name, [_json_value(conv, v) for v in payload], {}
    return name, [_json_value(conv, payload)], {}
