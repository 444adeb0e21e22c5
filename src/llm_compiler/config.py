"""Options and limits of a compiler run, shared by the workflow and the agent."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llm_compiler.errors import ConfigurationError
from llm_compiler.tools.policy import ToolPolicy
from llm_compiler.tracing.prices import ModelPrice

#: Most tool calls one run executes at once (the executor's workers).
MAX_PARALLEL_TOOLS = 64


class CompilerConfig(BaseModel):
    """How a compiler run behaves; frozen (use ``model_copy(update=...)`` to vary).

    Attributes:
        max_replans: Replan rounds allowed after the first plan; the last must finish.
        max_concurrency: Most tool calls running at once per run (None: up to
            ``MAX_PARALLEL_TOOLS``, which is also the most it may be).
        tool_timeout: Seconds per tool call (None: none); a timeout is an error
            observation.
        max_tasks: Most tasks accepted in one plan; later lines become a plan error.
        max_observation_chars: Observations longer than this are cut in prompts.
        max_plan_chars: Most characters of planner output read per round; the rest is
            one plan error.
        max_plan_errors: Most plan errors recorded per round; then the planner's output
            is no longer read (one more error says so).
        max_line_chars: A plan line longer than this is an error task, not parsed.
        max_arg_depth: Arguments nested deeper than this are an error task.
        max_result_chars: A tool output longer than this (as JSON) is cut to this many
            characters of text, in the state and for its dependents.
        max_prompt_chars: The earlier rounds shown in a planner or joiner prompt are cut
            to this many characters (each observation to its share, then the middle).
        stream_tokens: Stream planner and joiner tokens as ``CompilerStream`` events.
        constrained: Ask the model server for constrained decoding (a grammar or JSON
            schema from the tools) when the dialect has one. None: on where the server
            takes it (``llm_compiler.engine.llm.constrained_for``: llama.cpp servers, the
            embedded model among them, and structured outputs for JSON plans), else off.
        value_aids: Under constrained decoding, narrow the values a plan and an answer
            may write to what the run has seen: spans of the question and of what was
            found, the tools' declared values, those numbers, ``$N`` of tasks that
            found something (:mod:`llm_compiler.dialects.grounding`). They never add,
            require or merge a call. Off: the grammars bound only the form and the
            declared types.
        tracing: Emit the run's spans through llama-index's instrumentation dispatcher
            (see :mod:`llm_compiler.tracing`); tokens and cost are counted either way.
        prices: Model prices (USD per million tokens) added to the built-in table, for
            the run summary's cost (see :mod:`llm_compiler.tracing.prices`).
        tool_policies: Policies by tool name (see :mod:`llm_compiler.tools.policy`); they
            replace a policy declared on the tool itself.
        task_order: Which ready task gets a free slot first when a limit binds:
            ``critical_path`` (the one with the longest chain of tasks behind it) or
            ``plan`` (the lowest id).
        cache_results: Serve a repeated call of a cacheable tool (``pure``, or opted in
            by its policy) from the result cache instead of calling it again (see
            :mod:`llm_compiler.engine.cache`). Off: every call runs.
        cache_namespace: Whose results a workflow's calls are served: None, its own only;
            a name, those of every workflow with that name (whose equal-looking tools
            must then give equal results), in this process or a shared store.
        cache_plans: Keep the plan of a run that answered in its first round as a
            template, and give a new question of the same shape (its other words the
            same, its names and numbers at the same places) that plan filled with its own
            values instead of a planner call (see :mod:`llm_compiler.engine.plan_cache`).
            Only plans whose every call is of a ``pure`` tool, unless
            ``cache_plans_with_effects``.
        cache_plans_with_effects: Reuse plans that call tools that are not ``pure`` too.
        speculate: Keep such templates, and while the planner writes a fresh question's
            first plan, start the ``pure`` calls the template of its shape predicts; the
            real plan's equal calls take their results (see
            :mod:`llm_compiler.engine.speculation`). Needs ``cache_results``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_replans: int = Field(default=3, ge=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    tool_timeout: float | None = Field(default=None, gt=0)
    max_tasks: int = Field(default=100, ge=1)
    max_observation_chars: int = Field(default=4000, ge=1)
    max_plan_chars: int = Field(default=200_000, ge=1)
    max_plan_errors: int = Field(default=20, ge=1)
    max_line_chars: int = Field(default=20_000, ge=1)
    max_arg_depth: int = Field(default=20, ge=1)
    max_prompt_chars: int = Field(default=100_000, ge=1000)
    max_result_chars: int = Field(default=1_000_000, ge=1)
    stream_tokens: bool = True
    constrained: bool | None = None
    value_aids: bool = True
    tracing: bool = True
    prices: dict[str, ModelPrice] | None = None
    tool_policies: dict[str, ToolPolicy] | None = None
    task_order: Literal["critical_path", "plan"] = "critical_path"
    cache_results: bool = True
    cache_namespace: str | None = Field(default=None, min_length=1)
    cache_plans: bool = False
    cache_plans_with_effects: bool = False
    speculate: bool = False

    @model_validator(mode="after")
    def _check(self) -> CompilerConfig:
        if self.max_concurrency is not None and self.max_concurrency > MAX_PARALLEL_TOOLS:
            raise ValueError(
                f"max_concurrency={self.max_concurrency} is more than the executor's "
                f"{MAX_PARALLEL_TOOLS} workers."
            )
        return self

    @property
    def concurrency(self) -> int:
        """The effective limit on tool calls at once."""
        return self.max_concurrency or MAX_PARALLEL_TOOLS


#: The names of ``CompilerConfig``'s fields: the keyword arguments that configure a run.
CONFIG_FIELDS = frozenset(CompilerConfig.model_fields)


def split_config(options: dict[str, Any]) -> dict[str, Any]:
    """Take the ``CompilerConfig`` fields out of keyword arguments `options`; return them."""
    return {k: options.pop(k) for k in list(options) if k in CONFIG_FIELDS}


def make_config(config: CompilerConfig | None, overrides: dict[str, Any]) -> CompilerConfig:
    """`config` (or the defaults) with keyword overrides; bad values are a ConfigurationError."""
    try:
        base = config or CompilerConfig()
        if not overrides:
            return base
        return CompilerConfig.model_validate({**base.model_dump(), **overrides})
    except ValueError as e:  # pydantic's ValidationError is a ValueError
        raise ConfigurationError(f"Invalid compiler option: {e}") from None
