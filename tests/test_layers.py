"""The package's import graph: no cycle between its packages nor between its modules, and an
engine that stands alone.

A static reading of every ``import`` in ``src/llm_compiler`` (those inside functions and
under ``TYPE_CHECKING`` included): a unit is a top-level module or package
(``llm_compiler.engine``, ``llm_compiler.errors``), and the package's own ``__init__`` is
the unit ``llm_compiler``, which nothing inside may import. Between modules, importing
``a.b.c`` also runs the ``__init__`` of ``a.b`` unless ``a.b`` is a package the importing
module is inside (already running), so a module that imports a sibling package's part
depends on that package's ``__init__`` too: an import inside a function does not hide a circle.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import llm_compiler

SRC = Path(llm_compiler.__file__).parent
ROOT = "llm_compiler"

#: What the engine may not import: it runs without a server, a durable engine, the legacy
#: API, the embedded model, the agent adapters or the presets built on it.
ENGINE_MUST_NOT_IMPORT = {
    "agents",
    "cli",
    "compat",
    "demo",
    "durable",
    "models",
    "presets",
    "serving",
    "testing",
}

Edges = dict[str, dict[str, set[str]]]


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _unit(module: str) -> str:
    """``llm_compiler.engine.llm`` -> ``llm_compiler.engine``; the root stays the root."""
    return ".".join(module.split(".")[:2])


def _imported(node: ast.AST, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The ``llm_compiler`` modules one import statement names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == ROOT]
    if not isinstance(node, ast.ImportFrom):
        return []
    base = node.module or ""
    if node.level:  # relative: from the module's package, up `level - 1` more
        package = module.split(".") if is_package else module.split(".")[:-1]
        anchor = package[: len(package) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    if base.split(".")[0] != ROOT:
        return []
    # `from llm_compiler import tools` imports the module llm_compiler.tools.
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
    return subs if subs and len(subs) == len(node.names) else [base, *subs]


def _imports() -> Iterator[tuple[str, int, str, set[str]]]:
    """Each import of the package: (importing module, line, imported module, every module)."""
    files = {_module_name(p): p for p in SRC.rglob("*.py")}
    known = set(files)
    for module, path in files.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for target in _imported(node, module, is_package, known):
                yield module, getattr(node, "lineno", 0), target, known


def import_graph() -> Edges:
    """unit -> imported unit -> the modules whose imports make that edge."""
    edges: Edges = defaultdict(lambda: defaultdict(set))
    for module, _, target, _ in _imports():
        source, dest = _unit(module), _unit(target)
        if source != dest:
            edges[source][dest].add(module)
    return edges


def module_graph() -> Edges:
    """module -> imported module -> the ``module:line`` of each import making that edge,
    the ``__init__`` of every package an import runs included."""
    edges: Edges = defaultdict(lambda: defaultdict(set))
    for module, line, target, known in _imports():
        for runs in _modules_run(target, module, known):
            edges[module][runs].add(f"{module}:{line}")
    return edges


def _modules_run(target: str, importer: str, known: set[str]) -> list[str]:
    """The modules that importing `target` from `importer` may run: `target` and each
    package above it that `importer` is not inside (the root excepted: it is checked apart)."""
    parts = target.split(".")
    inside = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 2)}
    found = (".".join(parts[:i]) for i in range(2, len(parts) + 1))
    return [m for m in found if m in known and m not in inside]


def cycles(edges: Edges) -> list[list[str]]:
    """Every strongly connected set of two or more units (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def _describe(edges: Edges, component: list[str]) -> str:
    inside = set(component)
    lines = [
        f"  {a} -> {b} (in {', '.join(sorted(edges[a][b]))})"
        for a in component
        for b in sorted(edges.get(a, {}))
        if b in inside
    ]
    return "\n".join(lines)


def test_no_cycle_between_packages():
    edges = import_graph()
    found = cycles(edges)
    report = "\n\n".join(_describe(edges, c) for c in found)
    assert not found, f"Import cycles between packages of llm_compiler:\n{report}"


def test_no_cycle_between_modules():
    edges = module_graph()
    found = cycles(edges)
    report = "\n\n".join(_describe(edges, c) for c in found)
    assert not found, f"Import cycles between modules of llm_compiler:\n{report}"


def test_nothing_inside_imports_the_package_root():
    edges = import_graph()
    importers = {a: sorted(b[ROOT]) for a, b in edges.items() if ROOT in b}
    assert not importers, f"Import the defining module, not `llm_compiler`: {importers}"


def test_the_engine_imports_no_server_durable_engine_legacy_api_or_model():
    edges = import_graph()
    engine = edges[f"{ROOT}.engine"]
    bad = {d: sorted(m) for d, m in engine.items() if d.split(".")[-1] in ENGINE_MUST_NOT_IMPORT}
    assert not bad, f"The engine imports {bad}"


def test_the_dialects_do_not_import_the_engine():
    assert f"{ROOT}.engine" not in import_graph()[f"{ROOT}.dialects"]


def test_the_engine_uses_the_dialect_protocol_and_no_dialect_but_the_default():
    # The protocol, prompt records (and the facts of their outcomes), the default. Not the
    # value aids (grounding): what the engine acts on lives beside it (engine.replan).
    allowed = {"base", "prompting", "llmcompiler"}
    engine = SRC / "engine"
    known = {_module_name(p) for p in SRC.rglob("*.py")}
    used = {
        target
        for path in engine.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        for target in _imported(node, _module_name(path), path.name == "__init__.py", known)
        if target.startswith(f"{ROOT}.dialects.")
    }
    assert {t.split(".")[2] for t in used} <= allowed, sorted(used)


def test_decoding_modes_live_below_the_engine_and_the_model_launcher():
    edges = module_graph()
    assert not [m for m in edges[f"{ROOT}.decoding"] if m.startswith(f"{ROOT}.")]
    for user in (f"{ROOT}.engine.llm", f"{ROOT}.models.resolve"):
        assert f"{ROOT}.decoding" in edges[user], user
    assert f"{ROOT}.engine" not in import_graph()[f"{ROOT}.models"]


def test_the_checker_sees_a_cycle_and_its_modules():
    edges: Edges = {
        "a": {"b": {"a.x"}},
        "b": {"c": {"b.y"}},
        "c": {"a": {"c.z"}},
        "d": {"a": {"d.w"}},
    }
    assert cycles(edges) == [["a", "b", "c"]]
    assert "b -> c (in b.y)" in _describe(edges, ["a", "b", "c"])


def test_the_checker_reads_submodule_and_relative_imports():
    known = {"llm_compiler.tools", "llm_compiler.tools.render", "llm_compiler.engine"}
    [node] = ast.parse("from llm_compiler import tools").body
    assert _imported(node, "llm_compiler.dialects.x", False, known) == ["llm_compiler.tools"]
    [node] = ast.parse("from ..tools import render").body
    found = _imported(node, "llm_compiler.dialects.x", False, known)
    assert found == ["llm_compiler.tools.render"]
    [node] = ast.parse("from llm_compiler import CompilerConfig").body
    assert _imported(node, "llm_compiler.x", False, known) == ["llm_compiler"]


def test_the_module_checker_counts_the_packages_an_import_runs():
    known = {
        "llm_compiler.dialects",
        "llm_compiler.dialects.grounding",
        "llm_compiler.dialects.llmcompiler",
        "llm_compiler.dialects.llmcompiler.parser",
    }
    runs = _modules_run(
        "llm_compiler.dialects.llmcompiler.parser", "llm_compiler.dialects.grounding", known
    )
    # `dialects` is already running (grounding is inside it); `llmcompiler`'s __init__ is not.
    assert runs == ["llm_compiler.dialects.llmcompiler", "llm_compiler.dialects.llmcompiler.parser"]
    inside = _modules_run(
        "llm_compiler.dialects.llmcompiler.parser", "llm_compiler.dialects.llmcompiler.x", known
    )
    assert inside == ["llm_compiler.dialects.llmcompiler.parser"]
