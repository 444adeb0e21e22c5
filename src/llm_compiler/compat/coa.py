"""``CoAAgentWorker`` and ``CoAAgentPack`` (llama-index-packs-agents-coa)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM

from llm_compiler.compat._worker import LegacyPack, LegacyWorker, deprecated
from llm_compiler.dialects.coa import CoADialect
from llm_compiler.presets import ChainOfAbstractionWorkflow


class CoAAgentWorker(LegacyWorker):
    """The legacy Chain-of-Abstraction worker, on this project's engine.

    ``reasoning_prompt_template`` (``{functions}``, ``{question}``) and
    ``refine_reasoning_prompt_template`` (``{question}``, ``{prev_reasoning}``) are the
    prompts used when given (``None``: the built-in ones). ``output_parser`` has no role
    any more: calls are parsed while the reasoning streams, and run in parallel.
    """

    coa = True
    workflow_class = ChainOfAbstractionWorkflow

    def __init__(
        self,
        llm: LLM | None,
        reasoning_prompt_template: str | None = None,
        refine_reasoning_prompt_template: str | None = None,
        output_parser: Any = None,
        tools: Sequence[Any] | None = None,
        tool_retriever: Any = None,
        callback_manager: Any = None,
        verbose: bool = False,
        **options: Any,
    ) -> None:
        if tools is None and tool_retriever is None:
            raise ValueError("Either tools or tool_retriever must be provided.")
        super().__init__(tools, llm, tool_retriever, callback_manager, verbose, options)
        if output_parser is not None:
            deprecated(
                type(self).__name__,
                "output_parser",
                "is not used: the reasoning's calls are parsed as it streams "
                "(llm_compiler.dialects.coa.CoAParser) and run in parallel.",
            )
        self.reasoning_prompt_template = reasoning_prompt_template
        self.refine_reasoning_prompt_template = refine_reasoning_prompt_template
        self.output_parser = output_parser
        self.dialect = CoADialect(
            reasoning_template=reasoning_prompt_template,
            answer_template=refine_reasoning_prompt_template,
        )

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[Any] | None = None,
        tool_retriever: Any = None,
        llm: LLM | None = None,
        reasoning_prompt_template: str | None = None,
        refine_reasoning_prompt_template: str | None = None,
        output_parser: Any = None,
        callback_manager: Any = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> CoAAgentWorker:
        """As before; engine options (``tool_timeout=`` ...) may be given too."""
        return cls(
            llm,
            reasoning_prompt_template,
            refine_reasoning_prompt_template,
            output_parser,
            tools=tools,
            tool_retriever=tool_retriever,
            callback_manager=callback_manager,
            verbose=verbose,
            **kwargs,
        )


class CoAAgentPack(LegacyPack):
    """The legacy pack: ``CoAAgentPack(tools=[add], llm=llm).run("What is 1245 + 4321?")``."""

    worker_class = CoAAgentWorker
