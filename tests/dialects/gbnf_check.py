"""A small GBNF recognizer for tests: does a grammar accept a whole text?

It reads the syntax llama.cpp's grammar parser reads (rules, literals, character
classes, groups, ``|``, ``?``, ``*``, ``+``, ``{m,n}``, ``.``) and matches by exploring
every parse. The tests marked ``llm`` check the same grammars with llama.cpp itself.
"""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass, field
from functools import cache

_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-"}
_NAME = re.compile(r"[a-zA-Z0-9-]+")


@dataclass
class _Reader:
    text: str
    pos: int = 0
    rules: dict[str, tuple] = field(default_factory=dict)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def space(self, nested: bool) -> None:
        while self.pos < len(self.text):
            ch = self.text[self.pos]
            if ch == "#":
                while self.pos < len(self.text) and self.text[self.pos] != "\n":
                    self.pos += 1
            elif ch in " \t" or (nested and ch in "\r\n"):
                self.pos += 1
            else:
                return

    def char(self) -> str:
        ch = self.text[self.pos]
        self.pos += 1
        if ch != "\\":
            return ch
        esc = self.text[self.pos]
        self.pos += 1
        width = {"x": 2, "u": 4, "U": 8}.get(esc)
        if width:
            code = int(self.text[self.pos : self.pos + width], 16)
            self.pos += width
            return chr(code)
        return _ESCAPES[esc]

    def alternatives(self, nested: bool) -> tuple:
        options = [self.sequence(nested)]
        while self.peek() == "|":
            self.pos += 1
            self.space(True)
            options.append(self.sequence(nested))
        return ("alt", options)

    def sequence(self, nested: bool) -> tuple:
        items: list[tuple] = []
        while True:
            ch = self.peek()
            if ch == '"':
                self.pos += 1
                lit = ""
                while self.peek() != '"':
                    lit += self.char()
                self.pos += 1
                items.append(("lit", lit))
            elif ch == "[":
                items.append(self.char_class())
            elif ch == "(":
                self.pos += 1
                self.space(True)
                items.append(self.alternatives(True))
                assert self.peek() == ")", f"expected ) at {self.pos}"
                self.pos += 1
            elif ch == ".":
                self.pos += 1
                items.append(("any",))
            elif ch and _NAME.match(ch):
                name = _NAME.match(self.text, self.pos).group()
                self.pos += len(name)
                items.append(("ref", name))
            elif ch in ("*", "+", "?", "{") and items:
                items[-1] = self.repetition(items[-1])
            else:
                return ("seq", items)
            self.space(nested)

    def char_class(self) -> tuple:
        self.pos += 1
        negated = self.peek() == "^"
        self.pos += negated
        ranges = []
        while self.peek() != "]":
            lo = self.char()
            hi = lo
            if self.peek() == "-" and self.text[self.pos + 1] != "]":
                self.pos += 1
                hi = self.char()
            ranges.append((lo, hi))
        self.pos += 1
        return ("cls", negated, tuple(ranges))

    def repetition(self, node: tuple) -> tuple:
        ch = self.text[self.pos]
        self.pos += 1
        if ch != "{":
            return ("rep", node, {"*": 0, "+": 1, "?": 0}[ch], 1 if ch == "?" else None)
        end = self.text.index("}", self.pos)
        spec, self.pos = self.text[self.pos : end], end + 1
        low, _, high = spec.partition(",")
        if "," not in spec:
            return ("rep", node, int(low), int(low))
        return ("rep", node, int(low or 0), int(high) if high.strip() else None)


def parse(grammar: str) -> dict[str, tuple]:
    """Rules by name; raises on syntax the recognizer does not know or undefined rules."""
    r = _Reader(grammar)
    while True:
        r.space(True)
        if r.pos >= len(grammar):
            break
        name = _NAME.match(grammar, r.pos)
        assert name, f"expected a rule name at {grammar[r.pos : r.pos + 30]!r}"
        r.pos = name.end()
        r.space(False)
        assert grammar.startswith("::=", r.pos), f"expected ::= after {name.group()}"
        r.pos += 3
        r.space(True)
        assert name.group() not in r.rules, f"rule {name.group()} defined twice"
        r.rules[name.group()] = r.alternatives(False)
        assert r.peek() in ("\n", "\r", ""), f"unexpected {grammar[r.pos : r.pos + 30]!r}"
    refs = set(re.findall(r"\('ref', '([^']+)'\)", repr(r.rules)))
    undefined = refs - set(r.rules)
    assert not undefined, f"undefined rules: {undefined}"
    return r.rules


def accepts(grammar: str, text: str, root: str = "root") -> bool:
    """Whether `grammar` derives exactly `text`."""
    rules = parse(grammar)

    @cache
    def rule(name: str, pos: int) -> frozenset[int]:
        return match(rules[name], pos)

    def match(node: tuple, pos: int) -> frozenset[int]:
        kind = node[0]
        if kind == "lit":
            return frozenset([pos + len(node[1])]) if text.startswith(node[1], pos) else frozenset()
        if kind in ("cls", "any"):
            if pos >= len(text):
                return frozenset()
            if kind == "any":
                return frozenset([pos + 1])
            inside = any(lo <= text[pos] <= hi for lo, hi in node[2])
            return frozenset([pos + 1]) if inside != node[1] else frozenset()
        if kind == "ref":
            return rule(node[1], pos)
        if kind == "alt":
            return frozenset().union(*(match(o, pos) for o in node[1]))
        if kind == "seq":
            ends = frozenset([pos])
            for item in node[1]:
                ends = frozenset().union(*(match(item, p) for p in ends))
            return ends
        _, inner, low, high = node
        found, frontier, count, seen = set(), {pos}, 0, set()
        while frontier and (high is None or count <= high):
            if count >= low:
                found |= frontier
            if high is not None and count == high:
                break
            seen |= frontier
            frontier = set().union(*(match(inner, p) for p in frontier))
            if count >= low:
                frontier -= seen
            count += 1
        return frozenset(found)

    return len(text) in rule(root, 0)


class LlamaCppGrammars:
    """llama.cpp's own grammar parser and sampler over a model's vocabulary (no weights).

    Needs llama-cpp-python; `model` is a GGUF file, of which only the vocabulary loads.
    """

    def __init__(self, model: str) -> None:
        import llama_cpp

        self._llama = llama_cpp
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(model.encode(), params)
        assert self._model, f"cannot load the vocabulary of {model}"
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)

    def close(self) -> None:
        self._llama.llama_model_free(self._model)

    def parses(self, grammar: str) -> bool:
        """Whether llama.cpp parses `grammar` (it returns no sampler for a bad one)."""
        sampler = self._llama.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        if sampler:
            self._llama.llama_sampler_free(sampler)
        return bool(sampler)

    def tokens(self, text: str) -> list[int]:
        data = text.encode()
        out = (self._llama.llama_token * (len(data) + 8))()
        n = self._llama.llama_tokenize(self.vocab, data, len(data), out, len(out), False, False)
        assert n >= 0
        return list(out[:n])

    def accepts(self, grammar: str, text: str) -> bool:
        """Whether sampling under `grammar` can produce `text` and then stop (EOS)."""
        llama = self._llama
        sampler = llama.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, "llama.cpp could not parse the grammar"
        try:
            for token in [*self.tokens(text), llama.llama_vocab_eos(self.vocab)]:
                cell = (llama.llama_token_data * 1)(llama.llama_token_data(token, 0.0, 0.0))
                candidates = llama.llama_token_data_array(cell, 1, -1, False)
                llama.llama_sampler_apply(sampler, ctypes.byref(candidates))
                if cell[0].logit == float("-inf"):
                    return False
                llama.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama.llama_sampler_free(sampler)
