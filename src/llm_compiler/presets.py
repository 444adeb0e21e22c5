"""Presets: the engine's workflow set up for a dialect other than the default.

:class:`ChainOfAbstractionWorkflow` is the LLMCompiler engine (the same events, streaming
scheduler, parallel executor, limits, state and UI) with the
:class:`~llm_compiler.dialects.coa.CoADialect` and no replanning: one reasoning call, the
calls in parallel, one answer call (none when the reasoning calls nothing). It adds no
step; it only fixes the dialect and ``max_replans=0``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM

from llm_compiler.config import CompilerConfig, make_config, split_config
from llm_compiler.dialects.coa import CoADialect
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import ConfigurationError
from llm_compiler.tools import ToolLike


def _no_replans(config: CompilerConfig | None, options: dict[str, Any]) -> CompilerConfig:
    """The options as a config whose ``max_replans`` is 0 (CoA answers, never replans)."""
    overrides = split_config(options)
    if overrides.get("max_replans"):
        raise ConfigurationError("Chain-of-Abstraction does not replan: leave max_replans out.")
    return make_config(config, {**overrides, "max_replans": 0})


class ChainOfAbstractionWorkflow(LLMCompilerWorkflow):
    """Chain-of-Abstraction as a LlamaIndex workflow on the LLMCompiler engine.

    ``await wf.run(user_msg=...)`` returns a ``CompilerOutput`` like
    :class:`~llm_compiler.engine.workflow.LLMCompilerWorkflow`, and streams the same events.

    Args:
        tools: llama-index tools or plain callables.
        llm: Any llama-index LLM, chat or completion. Default: ``Settings.llm``.
        config: Options and limits (``max_replans`` is always 0).
        dialect: A configured :class:`CoADialect` (else one is built from the
            template and example arguments below).
        reasoning_template: See :class:`CoADialect`.
        answer_template: See :class:`CoADialect`.
        reasoning_examples: See :class:`CoADialect`.
        answer_examples: See :class:`CoADialect`.
        **options: As for ``LLMCompilerWorkflow`` (``tool_timeout=``, ``name=`` ...).
    """

    def __init__(
        self,
        tools: Sequence[ToolLike] = (),
        llm: LLM | None = None,
        *,
        config: CompilerConfig | None = None,
        dialect: CoADialect | None = None,
        reasoning_template: str | None = None,
        answer_template: str | None = None,
        reasoning_examples: str | None = None,
        answer_examples: str | None = None,
        name: str = "chain_of_abstraction",
        **options: Any,
    ) -> None:
        given = (reasoning_template, answer_template, reasoning_examples, answer_examples)
        if dialect is not None and any(g is not None for g in given):
            raise ConfigurationError("Give templates and examples to the dialect, not beside it.")
        dialect = dialect or CoADialect(
            reasoning_examples=reasoning_examples,
            answer_examples=answer_examples,
            reasoning_template=reasoning_template,
            answer_template=answer_template,
        )
        super().__init__(
            tools,
            llm,
            config=_no_replans(config, options),
            dialect=dialect,
            name=name,
            **options,
        )


__all__ = ["ChainOfAbstractionWorkflow"]
