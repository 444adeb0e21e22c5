"""examples/policies.py does what its docstring says: the payment is held while the rest
runs, paid once when approved and never when rejected; the two writes to one account do
not overlap; the flaky lookup is retried."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "policies.py"


@pytest.fixture
def example(monkeypatch) -> ModuleType:
    spec = importlib.util.spec_from_file_location("policies_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "policies_example", module)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "LATENCY", 0.0)
    monkeypatch.setattr(module, "BACKOFF", 0.0)
    return module


async def test_the_payment_waits_for_approval_and_runs_once(example, capsys):
    report = await example.main("approve")
    log = report["log"]
    assert log.count("pay ACME 120") == 1 and log[-1] == "pay ACME 120"  # after all the rest
    assert {"balance ACME", "rate EUR", "record ACME invoice 42", "record ACME fee 2.50"} <= set(
        log
    )
    assert report["writes_overlap"] is False and report["balance_tries"] == 2
    assert len(report["held"]) == 1 and report["held"][0].endswith(":0:5")
    assert "the payment is done" in report["answer"]
    out = capsys.readouterr().out
    assert "waits for key:account:ACME" in out and "try 2 of 3" in out


async def test_a_rejected_payment_never_runs(example):
    report = await example.main("reject")
    assert not any(what.startswith("pay") for what in report["log"])
    assert "record ACME fee 2.50" in report["log"] and "rejected" in report["answer"]
