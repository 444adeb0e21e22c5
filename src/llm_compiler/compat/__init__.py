"""The legacy LlamaIndex agent APIs on this engine: change the import, keep the code.

::

    # from llama_index.packs.agents_llm_compiler import LLMCompilerAgentWorker
    from llm_compiler.compat import LLMCompilerAgentWorker

    agent = LLMCompilerAgentWorker.from_tools(tools, llm=llm, verbose=True).as_agent()
    response = agent.chat("What is (121 * 3) + 42?")

``LLMCompilerAgentWorker``/``LLMCompilerAgentPack`` (llama-index-packs-agents-llm-compiler),
``CoAAgentWorker``/``CoAAgentPack`` (llama-index-packs-agents-coa) and ``AgentRunner``
(removed from llama-index-core 0.13) take the parameters they took; one that has no
meaning any more is accepted with a ``DeprecationWarning``. See docs/migration.md.
"""

from llm_compiler.compat.coa import CoAAgentPack, CoAAgentWorker
from llm_compiler.compat.llmcompiler import (
    LegacyLLMCompilerDialect,
    LLMCompilerAgentPack,
    LLMCompilerAgentWorker,
)
from llm_compiler.compat.runner import AgentRunner

__all__ = [
    "AgentRunner",
    "CoAAgentPack",
    "CoAAgentWorker",
    "LLMCompilerAgentPack",
    "LLMCompilerAgentWorker",
    "LegacyLLMCompilerDialect",
]
