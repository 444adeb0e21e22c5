"""The client snippets of ``docs/serving.md`` (OpenAI-compatible, MCP, A2A), each run as
written, in its own process, against a served compiler on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest

from llm_compiler.serving import build_app

from .conftest import ANSWER, start_server, stop, workflow

pytestmark = pytest.mark.timeout(120)

DOC = Path(__file__).parents[2] / "docs" / "serving.md"
SNIPPET = re.compile(r"<!-- snippet: (?P<name>\w+) -->\n```python\n(?P<code>.*?)```", re.S)
DOC_URL = "http://127.0.0.1:8000"


def snippets() -> dict[str, str]:
    return {m["name"]: m["code"] for m in SNIPPET.finditer(DOC.read_text())}


def test_each_surface_has_a_snippet():
    assert sorted(snippets()) == ["a2a", "mcp", "openai"]


@pytest.mark.parametrize("name", ["openai", "mcp", "a2a"])
async def test_the_snippet_runs_as_written(overlap, name, tmp_path):
    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    script = tmp_path / f"snippet_{name}.py"
    script.write_text(snippets()[name].replace(DOC_URL, url))
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        await stop(task)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert ANSWER in out.decode(), out.decode()
