"""``LLMCompilerAgentWorker`` and ``LLMCompilerAgentPack`` (the llm-compiler agent pack)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, MessageRole
from llama_index.core.prompts import PromptTemplate

from llm_compiler.compat._worker import LegacyPack, LegacyWorker
from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.base import JoinerDecision, LLMRequest, PlannerContext
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.dialects.thought_action import JOIN_STOP
from llm_compiler.errors import ConfigurationError


@dataclasses.dataclass(frozen=True)
class LegacyLLMCompilerDialect(LLMCompilerDialect):
    """The LLMCompiler dialect with the legacy worker's extra stops and joiner template.

    Args:
        stop: Extra stop sequences for the planner.
        joiner_prompt: A template with ``{query_str}`` (the question) and
            ``{context_str}`` (the plan with its observations), answered in the
            ``Thought: ... / Action: Finish(...)`` format.
    """

    stop: tuple[str, ...] = ()
    joiner_prompt: PromptTemplate | None = None

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        """The planner call, with the extra stops."""
        request = super().planner_request(context)
        return dataclasses.replace(request, stop=(*request.stop, *self.stop))

    def forced_decision(self, context: PromptContext) -> JoinerDecision | None:
        """None with the user's joiner template (it is always asked)."""
        return None if self.joiner_prompt is not None else super().forced_decision(context)

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        """The user's joiner template, as one user message (chat) or one prompt."""
        if self.joiner_prompt is None:
            return super().joiner_request(context)
        text = self.joiner_prompt.format(
            query_str=context.question, context_str=context.rendered_rounds()
        )
        if not context.chat:
            return LLMRequest(prompt=text, stop=JOIN_STOP)
        messages = [
            *prompting.chat_context(context.history),
            ChatMessage(role=MessageRole.USER, content=text),
        ]
        return LLMRequest(messages=messages, stop=JOIN_STOP)


def _template(joiner_prompt: PromptTemplate | str | None) -> PromptTemplate | None:
    if joiner_prompt is None:
        return None
    template = PromptTemplate(joiner_prompt) if isinstance(joiner_prompt, str) else joiner_prompt
    extra = set(template.template_vars) - {"query_str", "context_str"}
    if extra:
        raise ConfigurationError(
            f"joiner_prompt may use only {{query_str}} and {{context_str}}; it has "
            f"{', '.join(sorted(extra))}."
        )
    return template


class LLMCompilerAgentWorker(LegacyWorker):
    """The legacy LLMCompiler worker, on this project's engine.

    Same parameters as before; each is honoured: ``planner_example_prompt_str`` are the
    planner's few-shot examples, ``stop`` extra planner stop sequences, ``joiner_prompt``
    the joiner's template, ``max_replans`` the replan limit, and ``tool_retriever``
    chooses tools per question. Options of the new engine (``tool_timeout=``,
    ``max_concurrency=`` ...) may be given too.
    """

    def __init__(
        self,
        tools: Sequence[Any],
        llm: LLM | None,
        callback_manager: Any = None,
        verbose: bool = False,
        tool_retriever: Any = None,
        planner_example_prompt_str: str | None = None,
        stop: list[str] | None = None,
        joiner_prompt: PromptTemplate | str | None = None,
        max_replans: int = 3,
        **options: Any,
    ) -> None:
        super().__init__(tools, llm, tool_retriever, callback_manager, verbose, options)
        self.planner_example_prompt_str = planner_example_prompt_str
        self.stop = list(stop or [])
        self.joiner_prompt = _template(joiner_prompt)
        self.max_replans = max_replans
        self.dialect = LegacyLLMCompilerDialect(
            planner_examples=planner_example_prompt_str,
            stop=tuple(self.stop),
            joiner_prompt=self.joiner_prompt,
        )

    @classmethod
    def from_tools(
        cls,
        tools: Sequence[Any] | None = None,
        tool_retriever: Any = None,
        llm: LLM | None = None,
        callback_manager: Any = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> LLMCompilerAgentWorker:
        """As before, but every keyword argument is honoured (none is dropped)."""
        return cls(
            tools=tools or [],
            llm=llm,
            callback_manager=callback_manager,
            verbose=verbose,
            tool_retriever=tool_retriever,
            **kwargs,
        )

    def settings(self) -> dict[str, Any]:
        """The engine options, and the replan limit."""
        return {**self.options, "max_replans": self.max_replans}


class LLMCompilerAgentPack(LegacyPack):
    """The legacy pack: ``LLMCompilerAgentPack(tools, llm=llm).run("question")``."""

    worker_class = LLMCompilerAgentWorker
