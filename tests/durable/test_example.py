"""examples/durable_run.py does what its docstring says: killed while its tools run and
started again, it finishes; started once more, the finished run answers at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("asyncpg")
pytestmark = pytest.mark.timeout(240)

sys.path.insert(0, str(Path(__file__).parents[1] / "integration"))
from fake_openai import FakeOpenAI  # noqa: E402 - the tests' fake OpenAI-compatible server

EXAMPLE = Path(__file__).parents[2] / "examples" / "durable_run.py"
PLAN = 'Thought: three lookups.\n1. search("France")\n2. search("Japan")\n3. join()<END_OF_PLAN>'
ANSWER = "Thought: I have both.\nAction: Finish(Paris and Tokyo.)"


def reply(body: dict[str, Any]) -> str:
    return ANSWER if "Observation" in str(body) else PLAN


def test_the_example_finishes_after_a_kill(tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.responder = reply
        env = {**os.environ, "LLM_COMPILER_API_BASE": fake.base_url}
        env.update(LLM_COMPILER_MODEL="fake", DEMO_TOOL_LATENCY="2")
        env.pop("OPENAI_API_KEY", None)
        command = [sys.executable, str(EXAMPLE)]
        first = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert first.stdout is not None
        for line in first.stdout:
            if line.startswith("start 2"):
                break
        log = tmp_path / "durable_run.calls"
        deadline = time.monotonic() + 30
        while len(log.read_text().splitlines()) < 2:  # both lookups run (2 s each)
            assert time.monotonic() < deadline
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        first.stdout.close()
        env["DEMO_TOOL_LATENCY"] = "0"
        second = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert second.returncode == 0, second.stderr[-3000:]
        assert "answer: Paris and Tokyo." in second.stdout
        calls = (tmp_path / "durable_run.calls").read_text().splitlines()
        assert sorted(calls) == sorted(
            2 * ["durable-example:0:1 search('France')", "durable-example:0:2 search('Japan')"]
        )
        planner_calls = [r for r in fake.requests if "Observation" not in str(r)]
        assert len(planner_calls) == 1  # the finished plan was not asked again
        third = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
        assert "answer: Paris and Tokyo." in third.stdout
        assert len((tmp_path / "durable_run.calls").read_text().splitlines()) == 4
