"""Mermaid export of a run's DAG, from typed events and from the server's JSON envelopes."""

from __future__ import annotations

import httpx

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.serving.mermaid import run_graph, to_mermaid

from .conftest import ANSWER, PLAN, combine, scripted, sse, start_run


async def typed_events(wf: LLMCompilerWorkflow, question: str = "q?") -> list:
    handler = wf.run(user_msg=question)
    events = [ev async for ev in handler.stream_events()]
    await handler
    return events


async def test_the_dag_of_a_run_with_states_and_edges(overlap):
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=scripted(), timeout=30)
    text = to_mermaid(await typed_events(wf))
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    assert any(line.strip().startswith('t1["1. fetch(#quot;alpha#quot;)') for line in lines)
    assert sum(line.endswith(":::done") for line in lines) == 3
    for edge in ("t1 --> t3", "t2 --> t3", "t3 --> join0", "join0 --> answer"):
        assert f"  {edge}" in lines
    assert "t1 --> join0" not in text  # only tasks nothing else uses feed the join
    assert f'answer[/"{ANSWER}"/]' in text
    assert "classDef skipped" in text


async def test_failures_replans_and_skips_are_drawn():
    def broken(x: str) -> str:
        """Always fails."""
        raise ValueError("nope")

    plans = [
        '1. broken("a")\n2. combine("$1", "b")\n3. join()<END_OF_PLAN>',
        '4. combine("c", "d")\n5. join()<END_OF_PLAN>',
    ]
    llm = scripted(plans, ["Thought: It failed.\nAction: Replan(Try another way.)"])
    wf = LLMCompilerWorkflow(tools=[broken, combine], llm=llm, timeout=30)
    events = await typed_events(wf)
    graph = run_graph(events)
    assert {i: t.state for i, t in graph.tasks.items()} == {1: "error", 2: "skipped", 4: "done"}
    assert graph.replans == {1: "Try another way."}
    text = to_mermaid(events, direction="TD")
    assert 'subgraph round0["Round 0"]' in text and 'subgraph round1["Round 1"]' in text
    assert '  join0 -. "Try another way." .-> round1' in text
    assert "  join1 --> answer" in text


async def test_server_envelopes_give_the_same_chart(base_url, overlap):
    async with httpx.AsyncClient(base_url=base_url, timeout=20) as c:
        envelopes = [e for _, e in await sse(c, await start_run(c))]
    wf = LLMCompilerWorkflow(tools=[overlap.fetch, combine], llm=scripted([PLAN]), timeout=30)
    typed = await typed_events(wf)
    strip = lambda s: [line.split(" · ")[0] for line in s.splitlines()]  # noqa: E731 (timings differ)
    assert strip(to_mermaid(envelopes)) == strip(to_mermaid(typed))


def test_no_events_is_an_empty_chart():
    assert to_mermaid([]).splitlines()[0] == "flowchart LR"
    assert run_graph([{"type": "Nonsense"}, 42]).tasks == {}
