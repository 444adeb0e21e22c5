"""The price table, cost of calls, and sums of usage."""

from __future__ import annotations

import json

import pytest

from llm_compiler import ConfigurationError, LLMCompilerWorkflow
from llm_compiler.cli import main
from llm_compiler.engine.summary import covered
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tracing import OPENAI_PRICES, ModelPrice, Usage, load_prices, price_for
from llm_compiler.tracing.prices import PRICES_ENV, price_table
from llm_compiler.tracing.usage import reported_counts


def test_cost_of_a_call_bills_cached_input_at_its_rate():
    price = ModelPrice(input=2.0, cached_input=0.5, output=8.0)
    assert price.cost(1_000_000, 0) == pytest.approx(2.0)
    assert price.cost(1_000_000, 1_000_000, cached=400_000) == pytest.approx(1.2 + 0.2 + 8.0)
    assert ModelPrice(input=1.0, output=1.0).cost(10, 0, cached=10) == pytest.approx(1e-5)


def test_models_are_priced_exactly_or_as_their_dated_snapshot():
    table = OPENAI_PRICES
    assert price_for("gpt-4o-mini", table) is table["gpt-4o-mini"]
    assert price_for("gpt-4o-mini-2024-07-18", table) is table["gpt-4o-mini"]
    assert price_for("gpt-4o-2024-08-06", table) is table["gpt-4o"]
    assert price_for("gpt-4o-mini-audio", table) is None  # not a dated snapshot
    assert price_for("gemma-3-270m", table) is None and price_for(None, table) is None


def test_a_price_file_and_its_errors(tmp_path, monkeypatch):
    good = tmp_path / "prices.json"
    good.write_text(json.dumps({"gemma-3-270m": {"input": 0.01, "output": 0.02}}))
    assert load_prices(good)["gemma-3-270m"].output == 0.02
    monkeypatch.setenv(PRICES_ENV, str(good))
    assert "gemma-3-270m" in price_table() and "gpt-4o-mini" in price_table()
    for text, message in [
        ("[1, 2]", "must be an object"),
        ('{"m": {"input": -1, "output": 1}}', "invalid"),
        ('{"m": {"input": 1}}', "invalid"),
        ("{", "Cannot read"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(ConfigurationError, match=message):
            load_prices(bad)
    with pytest.raises(ConfigurationError, match="Cannot read"):
        load_prices(tmp_path / "missing.json")


def test_serve_rejects_a_bad_price_file(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("[]")
    assert main(["serve", "--prices", str(bad), "--workflow", "nope:x"]) == 1
    assert "must be an object" in capsys.readouterr().err


def test_config_prices_are_validated():
    with pytest.raises(ConfigurationError, match="prices"):
        LLMCompilerWorkflow(tools=[len], llm=ScriptedLLM([]), prices={"m": {"input": "x"}})


def test_an_unknown_cost_makes_the_total_unknown():
    known = Usage(prompt_tokens=10, completion_tokens=2, cost=0.5, calls=1)
    unknown = Usage(prompt_tokens=1, completion_tokens=1, cost=None, calls=1)
    assert Usage.total([known, known]).cost == 1.0
    total = Usage.total([known, unknown])
    assert (total.prompt_tokens, total.calls, total.cost) == (11, 2, None)
    assert Usage.total([]).cost == 0.0


def test_usage_reports_in_both_shapes():
    assert reported_counts({"prompt_tokens": 5, "completion_tokens": 2}) == (5, 2, 0)
    report = {
        "prompt_tokens": 5,
        "completion_tokens": 2,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    assert reported_counts(report) == (5, 2, 3)
    assert reported_counts({"input_tokens": 4, "output_tokens": 1}) == (4, 1, 0)
    assert reported_counts({"prompt_tokens": None}) is None and reported_counts(None) is None


def test_covered_time_counts_overlaps_once():
    assert covered([(0, 2), (1, 3), (5, 6), (2, 2)]) == pytest.approx(4)
    assert covered([]) == 0
