"""examples/compilers_calling_compilers.py does what its docstring says: the outer
compiler asks the inner one over A2A and over MCP at once, and a call held in an inner run
reaches the outer client, who answers it on the inner server."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.timeout(90)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "compilers_calling_compilers.py"


@pytest.fixture
def example(monkeypatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("compilers_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "compilers_example", module)
    spec.loader.exec_module(module)
    return module


def results(events: list[dict]) -> dict[int, dict]:
    return {e["value"]["task_id"]: e["value"] for e in events if e["type"] == "TaskResult"}


async def test_both_plans_run_at_once_and_the_inner_hold_reaches_the_outer_client(example):
    events = await example.main("approve")
    kinds = [e["type"] for e in events]
    done = results(events)
    assert done[1]["output"] == "ACME was paid 120 EUR." and not done[1]["is_error"]
    assert done[2]["output"] == "EUR is 1.08 USD; USD is 1.00."
    # The MCP task finished while the A2A task's inner payment was held: they overlapped.
    assert done[2]["finished_at"] < done[1]["finished_at"]
    assert done[1]["started_at"] < done[2]["finished_at"]
    held = [e["value"] for e in events if e["type"] == "RemoteApprovalRequest"]
    assert [(h["protocol"], h["tool"], h["args"]) for h in held] == [
        ("a2a", "pay", {"account": "ACME", "amount": 120})
    ]
    assert kinds.index("RemoteApprovalRequest") < kinds.index("StopEvent")


async def test_holds_over_both_protocols_are_answered_and_a_rejection_is_the_observation(
    example,
):
    pay = example.PAY
    plan = f'1. ask_over_a2a("{pay}")\n2. ask_over_mcp("{pay}")\n3. join()<END_OF_PLAN>'
    events = await example.main("reject", plan)
    held = [e["value"] for e in events if e["type"] == "RemoteApprovalRequest"]
    assert sorted(h["protocol"] for h in held) == ["a2a", "mcp"]
    done = results(events)
    assert set(done) == {1, 2}  # both inner runs went on after the verdicts
    assert all("paid 120" not in str(r["output"]) for r in done.values())
