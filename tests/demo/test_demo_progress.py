"""`make demo` says what it waits for: the model's server starting, the model reading its
prompt, its first token of each plan and answer (no model: events are fed by hand)."""

from __future__ import annotations

import importlib.util
import threading
from pathlib import Path

import pytest

from llm_compiler import CompilerStream, ReplanEvent
from llm_compiler.demo import tools as demo_tools

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.py"


@pytest.fixture
def demo(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", demo_tools.LATENCY)  # the script sets it
    spec = importlib.util.spec_from_file_location("demo_script", DEMO)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_first_token_of_each_plan_and_answer_is_announced_once(demo, capsys):
    printer = demo.Printer()
    for phase, rnd in [("plan", 0), ("plan", 0), ("join", 0), ("plan", 1), ("plan", 1)]:
        printer.event(
            CompilerStream(delta="x", current_agent_name="planner", phase=phase, round=rnd)
        )
    printer.event(ReplanEvent(round=0, reason="Emma was not looked up"))
    lines = capsys.readouterr().out.splitlines()
    writing = [line.split("] ", 1)[1] for line in lines if "writing" in line]
    assert writing == [
        "model  read its prompt; writing its plan (round 0)",
        "model  read its prompt; writing the answer (round 0)",
        "model  read its prompt; writing its plan (round 1)",
    ]
    assert lines[-1].endswith("model  reads its prompt for round 1")


async def test_the_embedded_server_is_started_before_planning_and_says_so(demo, capsys):
    class Server:
        running = False

    class Embedded:
        server = Server()
        started = threading.Event()

        def ensure_started(self) -> None:
            self.server.running = True
            self.started.set()

    llm = Embedded()
    await demo.start_model(llm, demo.Printer())
    out = capsys.readouterr().out
    assert llm.started.is_set()
    assert "starting its llama.cpp server" in out and "server listening" in out
    await demo.start_model(llm, demo.Printer())  # running: nothing to say
    await demo.start_model(object(), demo.Printer())  # a hosted model: nothing to start
    assert capsys.readouterr().out == ""
