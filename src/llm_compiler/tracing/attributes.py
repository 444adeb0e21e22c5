"""Span attribute names: OpenTelemetry's GenAI conventions where they name one, else ours.

See https://opentelemetry.io/docs/specs/semconv/gen-ai/ (``gen_ai.*``). Attributes with
no GenAI name are ``llm_compiler.*``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

OPERATION = "gen_ai.operation.name"
AGENT_NAME = "gen_ai.agent.name"
CONVERSATION_ID = "gen_ai.conversation.id"
REQUEST_MODEL = "gen_ai.request.model"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHED_TOKENS = "gen_ai.usage.cache_read.input_tokens"
ERROR_TYPE = "error.type"

RUN_ID = "llm_compiler.run_id"
DIALECT = "llm_compiler.dialect"
ROUND = "llm_compiler.round"
PHASE = "llm_compiler.phase"
TASK_ID = "llm_compiler.task.id"
TASK_DEPS = "llm_compiler.task.deps"
TASK_STATUS = "llm_compiler.task.status"
TASK_ERROR = "llm_compiler.task.error"
SKIPPED_REASON = "llm_compiler.task.skipped_reason"
TASK_CACHED = "llm_compiler.task.cached"
TASK_SAVED = "llm_compiler.task.saved_seconds"
ROUND_TASKS = "llm_compiler.round.task_ids"
ROUND_ERRORS = "llm_compiler.round.plan_errors"
ROUND_DECISION = "llm_compiler.round.decision"
REPLAN_REASON = "llm_compiler.round.replan_reason"
ROUND_CACHED_PLAN = "llm_compiler.round.cached_plan"
USAGE_SOURCE = "llm_compiler.usage.source"
COST = "llm_compiler.cost.usd"
LLM_CALLS = "llm_compiler.llm_calls"

#: The longest text an attribute carries (arguments, results, errors); the rest is cut.
MAX_VALUE_CHARS = 4000

Scalar = str | bool | int | float


def text(value: Any, limit: int = MAX_VALUE_CHARS) -> str:
    """`value` as attribute text (JSON for structures), cut to `limit` characters."""
    if isinstance(value, str):
        out = value
    else:
        try:
            out = json.dumps(value, ensure_ascii=False, default=repr)
        except (TypeError, ValueError):
            out = repr(value)
    return out if len(out) <= limit else out[:limit] + "...(cut)"


def clean(attributes: Mapping[str, Any]) -> dict[str, Scalar | list[Any]]:
    """Attributes OpenTelemetry accepts: None dropped, structures as JSON text."""
    out: dict[str, Scalar | list[Any]] = {}
    for key, value in attributes.items():
        if value is None:
            continue
        if isinstance(value, (str, bool, int, float)):
            out[key] = text(value) if isinstance(value, str) else value
        elif isinstance(value, (list, tuple)) and all(
            isinstance(v, (bool, int, float, str)) for v in value
        ):
            out[key] = list(value)
        else:
            out[key] = text(value)
    return out


def usage_attributes(
    prompt: int, completion: int, cached: int, cost: float | None
) -> dict[str, Any]:
    """The GenAI usage attributes (and our cost) of some LLM calls."""
    return {
        INPUT_TOKENS: prompt,
        OUTPUT_TOKENS: completion,
        CACHED_TOKENS: cached,
        COST: cost,
    }
