"""The BFCL eval: data from a wheel, systems, the loop and its report (scripted LLMs)."""

from __future__ import annotations

import json
import zipfile

import pytest

from evals import bfcl, systems
from evals.data import Item, load_items, wheel_path
from evals.systems import Attempt, parse_calls
from llm_compiler.testing import LLMCall, ScriptedLLM

FUNCTIONS = [
    {
        "name": "spotify.play",
        "description": "Play tracks of an artist for a while.",
        "parameters": {
            "type": "dict",
            "properties": {
                "artist": {"type": "string", "description": "The artist."},
                "duration": {"type": "integer", "description": "Minutes."},
            },
            "required": ["artist", "duration"],
        },
    }
]
QUESTION = "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes on Spotify."
TRUTH = [
    {"spotify.play": {"artist": ["Taylor Swift"], "duration": [20]}},
    {"spotify.play": {"artist": ["Maroon 5"], "duration": [15]}},
]
ITEM = Item("parallel_0", "parallel", [{"role": "user", "content": QUESTION}], FUNCTIONS, TRUTH)


def fake_wheel(path, categories=("parallel",)):
    with zipfile.ZipFile(path, "w") as zf:
        for category in categories:
            question = {
                "id": f"{category}_0",
                "question": [[{"role": "user", "content": QUESTION}]],
                "function": FUNCTIONS,
            }
            answer = {"id": f"{category}_0", "ground_truth": TRUTH}
            zf.writestr(f"bfcl_eval/data/BFCL_v4_{category}.json", json.dumps(question) + "\n")
            zf.writestr(
                f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json",
                json.dumps(answer) + "\n\n",
            )
    return path


def test_items_are_read_from_a_cached_wheel(tmp_path):
    wheel = fake_wheel(tmp_path / "bfcl_eval-2026.3.23-py3-none-any.whl")
    assert wheel_path(tmp_path) == wheel  # found in the cache: no download
    (item,) = load_items(wheel, ["parallel"])
    assert item.id == "parallel_0" and item.category == "parallel"
    assert item.question == QUESTION
    assert item.functions == FUNCTIONS and item.ground_truth == TRUTH
    with pytest.raises(KeyError, match="parallel_multiple"):
        load_items(wheel, ["parallel", "parallel_multiple"])


def test_sampling_is_seeded_and_keeps_file_order():
    items = [Item(str(i), "parallel", [], [], []) for i in range(50)]
    first = bfcl.sample_items(items, 10, seed=1)
    assert [i.id for i in first] == [i.id for i in bfcl.sample_items(items, 10, seed=1)]
    assert [int(i.id) for i in first] == sorted(int(i.id) for i in first)
    assert len(bfcl.sample_items(items, 0, seed=1)) == 50


def test_baseline_calls_are_parsed_with_ast():
    text = '```python\n[spotify.play(artist="A", duration=2), spotify.play("B", 3)]\n```'
    assert parse_calls(text, FUNCTIONS) == [
        ("spotify.play", {"artist": "A", "duration": 2}),
        ("spotify.play", {"artist": "B", "duration": 3}),
    ]
    with pytest.raises(ValueError, match="non-literal"):
        parse_calls("[spotify.play(artist=__import__('os'))]", FUNCTIONS)
    with pytest.raises(ValueError, match="not a call"):
        parse_calls('[{"name": "spotify.play"}]', FUNCTIONS)
    with pytest.raises(ValueError, match="not a list of calls"):
        parse_calls("spotify.play(artist=", FUNCTIONS)


def scripted(plan: str, baseline: str) -> ScriptedLLM:
    def reply(call: LLMCall) -> str:
        if call.prompt.rstrip().endswith("Calls: ["):
            return baseline
        if "Action: Finish" in call.prompt and "Observation" in call.prompt:
            return "Thought: done.\nAction: Finish(Playing.)"
        return plan

    return ScriptedLLM(reply, chat=False)


async def test_the_eval_loop_judges_each_system_on_the_same_item():
    plan = (
        '1. spotify.play(artist="Taylor Swift", duration=20)\n'
        '2. spotify.play("Maroon 5", 15)\n3. join()\n<END_OF_PLAN>'
    )
    baseline = 'spotify.play(artist="Taylor Swift", duration=20)]'
    llm = scripted(plan, baseline)
    outcomes = await bfcl.run_eval([ITEM], ["text", "baseline"], llm, timeout=30)
    text, base = outcomes
    assert (text.system, text.correct, text.calls_correct, text.malformed) == (
        "text",
        True,
        2,
        False,
    )
    assert text.calls == [
        ["spotify.play", {"artist": "Taylor Swift", "duration": 20}],
        ["spotify.play", {"artist": "Maroon 5", "duration": 15}],
    ]
    assert (base.correct, base.calls_correct, base.malformed) == (False, 1, False)
    rows = bfcl.summarize(outcomes, ["text", "baseline"])
    table = bfcl.markdown(rows, "scripted", "today", ["Skipped `json`: not here."])
    assert "| text | 1 | scripted | today | 1/1 (100%) | 2/2 (100%) | 0 | 0 |" in table
    assert "| baseline | 1 | scripted | today | 0/1 (0%) | 1/2 (50%) | 0 | 0 |" in table
    assert "Skipped `json`" in table


async def test_copied_example_tools_count_as_malformed_unknown_tool_calls():
    plan = '1. search("Taylor Swift")\n2. search("Maroon 5")\n'  # no join: the stream ends
    llm = scripted(plan, 'search(query="x")]')
    text, base = await bfcl.run_eval([ITEM], ["text", "baseline"], llm, timeout=30)
    assert text.malformed and text.unknown_tool_calls == 2 and not text.correct
    assert any("Unknown tool 'search'" in n for n in text.notes)
    assert base.unknown_tool_calls == 1 and not base.correct


async def test_a_failing_system_is_a_wrong_malformed_answer_not_a_crash():
    llm = ScriptedLLM([RuntimeError("server down")] * 2, chat=False)
    (text,) = await bfcl.run_eval([ITEM], ["text"], llm, timeout=30)
    assert text.malformed and not text.correct
    assert text.notes[0].startswith("failed:")
    assert bfcl.summarize([text], ["text"])[0].failures == 1


async def test_new_systems_plug_in_with_one_function(monkeypatch):
    monkeypatch.setattr(systems, "_REGISTRY", dict(systems._REGISTRY))
    monkeypatch.setattr(systems, "_UNAVAILABLE", dict(systems._UNAVAILABLE))

    systems.mark_unavailable("needs-gpu", "this system needs a GPU")

    @systems.register("exact")
    async def exact(item, llm):
        return [("spotify.play", {"artist": "Maroon 5", "duration": 15}), ("other", {})]

    ready, notes = bfcl.split_available(["exact", "needs-gpu", "nope"])
    assert ready == ["exact"]
    assert len(notes) == 2 and "GPU" in notes[0] and "nope" in notes[1]
    (outcome,) = await bfcl.run_eval([ITEM], ["exact"], ScriptedLLM([]), timeout=5)
    assert outcome.calls_correct == 1 and outcome.unknown_tool_calls == 1
    assert isinstance(await systems.run_system(exact, ITEM, ScriptedLLM([])), Attempt)


def test_results_are_written_as_markdown_and_json(tmp_path):
    out = tmp_path / "results" / "latest.json"
    bfcl.write_results(out, "| table |\n", {"model": "m"}, [])
    assert out.with_suffix(".md").read_text() == "| table |\n"
    assert json.loads(out.read_text()) == {"model": "m", "outcomes": []}
