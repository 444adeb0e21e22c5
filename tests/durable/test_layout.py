"""The durable package has one import direction: no cycle between its modules (imports
inside functions count too), and the engine imports nothing of it."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "llm_compiler"


def imports_of(path: Path, package: str) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
            rest = node.module[len(package) :].lstrip(".")
            if rest:
                out.add(rest.split(".")[0])
            else:
                out.update(alias.name for alias in node.names)
    return out


def test_no_cycle_between_durable_modules():
    modules = {p.stem: p for p in (SRC / "durable").glob("*.py") if p.stem != "__init__"}
    graph = {
        m: imports_of(p, "llm_compiler.durable") & set(modules) - {m} for m, p in modules.items()
    }
    seen: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        if seen.get(module) == 2:
            return
        assert seen.get(module) != 1, f"import cycle: {' -> '.join([*path, module])}"
        seen[module] = 1
        for dep in sorted(graph[module]):
            visit(dep, [*path, module])
        seen[module] = 2

    for module in sorted(graph):
        visit(module, [])


def test_the_engine_imports_no_durable_module():
    for path in (SRC / "engine").glob("*.py"):
        assert not imports_of(path, "llm_compiler.durable"), path.name
