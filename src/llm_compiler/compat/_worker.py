"""What the legacy workers and packs share: deprecations, ``as_agent`` and the pack shape."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from llama_index.core.llms import LLM

from llm_compiler.compat.runner import AgentRunner
from llm_compiler.config import CONFIG_FIELDS
from llm_compiler.dialects.base import PlanDialect
from llm_compiler.engine.llm import default_llm
from llm_compiler.engine.workflow import LLMCompilerWorkflow

#: Options of the new engine a legacy constructor also takes (``tool_timeout=10`` ...).
ENGINE_OPTIONS = CONFIG_FIELDS | {"timeout", "system_prompt", "name"}


def deprecated(owner: str, name: str, why: str) -> None:
    """Warn that `owner`'s parameter `name` has no meaning on this engine."""
    warnings.warn(f"{owner}({name}=...) {why}", DeprecationWarning, stacklevel=4)


def attach_callbacks(owner: str, llm: LLM, callback_manager: Any) -> None:
    """Attach a callback manager to the LLM as the legacy ``from_tools`` did, and say so."""
    if callback_manager is None:
        return
    deprecated(
        owner,
        "callback_manager",
        "only reaches the LLM's calls: tasks, plans and answers are workflow events "
        "(handler.stream_events()) and llama-index instrumentation spans.",
    )
    llm.callback_manager = callback_manager


def split_options(owner: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Engine options from `kwargs`; anything else is warned about, never silently dropped."""
    options = {k: v for k, v in kwargs.items() if k in ENGINE_OPTIONS}
    for name in sorted(set(kwargs) - ENGINE_OPTIONS):
        deprecated(owner, name, "is not a parameter of this engine and is ignored.")
    return options


class LegacyWorker:
    """Base of the compat workers: tools, LLM, verbosity, the options of the new engine
    (others warned about), the workflow built from them, and ``as_agent``."""

    coa = False
    #: The workflow class that answers each message, built with the worker's `dialect`.
    workflow_class: type[LLMCompilerWorkflow] = LLMCompilerWorkflow
    dialect: PlanDialect

    def __init__(
        self,
        tools: Sequence[Any] | None,
        llm: LLM | None,
        tool_retriever: Any,
        callback_manager: Any,
        verbose: bool,
        options: dict[str, Any],
    ) -> None:
        self.llm = llm or default_llm()
        self.tools = list(tools or [])
        self.tool_retriever = tool_retriever
        self.verbose = verbose
        self.callback_manager = callback_manager or self.llm.callback_manager
        self.options = split_options(type(self).__name__, options)
        attach_callbacks(type(self).__name__, self.llm, callback_manager)

    def settings(self) -> dict[str, Any]:
        """The workflow's options besides tools, LLM, dialect and retriever."""
        return dict(self.options)

    def build_workflow(self) -> LLMCompilerWorkflow:
        """The workflow that answers each message (one per agent), with this worker's
        settings."""
        return self.workflow_class(
            tools=self.tools,
            llm=self.llm,
            dialect=self.dialect,
            tool_retriever=self.tool_retriever,
            **self.settings(),
        )

    def as_agent(self, **kwargs: Any) -> AgentRunner:
        """An agent with the legacy chat surface (``chat``, ``stream_chat``, ``query`` ...)."""
        return AgentRunner(self, **kwargs)


class LegacyPack:
    """Base of the compat packs: ``run(query)`` and ``get_modules()`` as before."""

    worker_class: type[LegacyWorker]

    def __init__(
        self,
        tools: Sequence[Any],
        llm: LLM | None = None,
        callback_manager: Any = None,
        agent_worker_kwargs: dict[str, Any] | None = None,
        agent_runner_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.llm = llm or default_llm()
        self.callback_manager = callback_manager or self.llm.callback_manager
        worker_kwargs = {"verbose": True, **(agent_worker_kwargs or {})}
        self.agent_worker = self.worker_class.from_tools(  # type: ignore[attr-defined]
            tools=tools, llm=self.llm, callback_manager=callback_manager, **worker_kwargs
        )
        self.agent = AgentRunner(self.agent_worker, **(agent_runner_kwargs or {}))

    def get_modules(self) -> dict[str, Any]:
        """The pack's parts, under the legacy keys."""
        return {
            "llm": self.llm,
            "callback_manager": self.callback_manager,
            "agent_worker": self.agent_worker,
            "agent": self.agent,
        }

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """``agent.chat(...)``."""
        return self.agent.chat(*args, **kwargs)
