"""The compiler as one agent of a llama-index ``AgentWorkflow``."""

from llm_compiler.agents.coa import CoAAgent
from llm_compiler.agents.llmcompiler import LLMCompilerAgent

__all__ = ["CoAAgent", "LLMCompilerAgent"]
