"""A served workflow that needs no model: a scripted model answering by role and by rule.

    llm-compiler serve --workflow examples.served_scripted:make

Every run asks the planner (which plans the lookups of the cities named in the question)
and then the joiner (which answers from the results), for as many runs as come; memory
stays bounded. ``SCRIPTED_TOOL_SECONDS`` makes each lookup take that long (default 0.2).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re

from llm_compiler import LLMCompilerWorkflow, policy
from llm_compiler.testing import LLMCall, ScriptedLLM, by_role

logger = logging.getLogger(__name__)
TEMPERATURES = {"Oslo": 4.0, "Madrid": 24.0, "Tokyo": 16.0, "Lima": 19.0}


@policy(side_effect="pure")
async def get_weather(city: str) -> float:
    """The current temperature in a city, in degrees Celsius."""
    logger.info("Looking up the weather in %s.", city)  # the line names its run and task
    await asyncio.sleep(float(os.environ.get("SCRIPTED_TOOL_SECONDS", "0.2")))
    return TEMPERATURES.get(city, 15.0)


def question_of(call: LLMCall) -> str:
    """The question in a planner prompt: the text after its last ``Question:``."""
    return call.prompt.rpartition("Question:")[2]


def plan(call: LLMCall) -> str:
    """One lookup per known city the question names (Oslo if none), then join()."""
    cities = [c for c in TEMPERATURES if re.search(rf"\b{c}\b", question_of(call))] or ["Oslo"]
    lines = [f'{i}. get_weather(city="{c}")' for i, c in enumerate(cities, 1)]
    return "\n".join([*lines, f"{len(cities) + 1}. join()<END_OF_PLAN>"])


def answer(call: LLMCall) -> str:
    """Finish with the observations the joiner was shown."""
    found = re.findall(r"get_weather\(city=.(\w+).\)\nObservation: ([\d.]+)", call.prompt)
    said = ", ".join(f"{city} {temp} C" for city, temp in found) or "no result"
    return f"Thought: the lookups are done.\nAction: Finish({said})"


def make() -> LLMCompilerWorkflow:
    """The compiler over `get_weather`, on the scripted model."""
    llm = ScriptedLLM(by_role(planner=plan, joiner=answer))
    return LLMCompilerWorkflow(tools=[get_weather], llm=llm, timeout=60)
