"""`make demo`: Q reaches the demo as typed, and the demo says what its encyclopedia knows."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

QUESTIONS = [
    "What's the capital of Norway?",
    'He said "hi"; `echo no` $(echo no) $HOME \\ & | > out.txt',
    "",
]


@pytest.mark.parametrize("question", QUESTIONS)
def test_the_demo_gets_q_intact(tmp_path, question):
    if shutil.which("make") is None or not (ROOT / ".venv/.stamp-core").exists():
        pytest.skip("needs make and an installed .venv (make install)")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    seen = tmp_path / "seen.json"
    python = fake_bin / "python"  # stands in for the venv's python: records what it got
    python.write_text(
        f"#!{sys.executable}\nimport json, os, sys\n"
        f"json.dump([sys.argv[1:], os.environ.get('DEMO_QUESTION'), os.environ.get('DIALECT')],"
        f" open({str(seen)!r}, 'w'))\n"
    )
    python.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "LLM_COMPILER_API_BASE": "http://127.0.0.1:9/v1"}
    proc = subprocess.run(
        ["make", "-s", "demo", f"BIN={fake_bin}", f"Q={question}", "DIALECT=coa"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    argv, got, dialect = json.loads(seen.read_text())
    assert argv == ["examples/demo.py"] and got == question and dialect == "coa"
    assert not (ROOT / "out.txt").exists()


def test_the_demo_says_what_its_encyclopedia_knows():
    import json as _json

    from llm_compiler.demo import tools as demo_tools

    text = demo_tools.contents()
    entries = _json.loads(demo_tools.ENCYCLOPEDIA_PATH.read_text(encoding="utf-8"))
    assert text.startswith(f"The demo encyclopedia has {len(entries)} entries")
    assert all(e["title"] in text for e in entries)
    assert "- mountain (height_m): Mount Everest" in text
    proc = subprocess.run(
        [sys.executable, "examples/demo.py", "--contents"], cwd=ROOT, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == text
