"""LLMCompiler: parallel function calling as an event-driven LlamaIndex workflow."""

from llm_compiler.agent import LLMCompilerAgent
from llm_compiler.coa import ChainOfAbstractionWorkflow, CoAAgent
from llm_compiler.errors import ConfigurationError, LLMCallError, LLMCompilerError, RunError
from llm_compiler.events import (
    CompilerStartEvent,
    CompilerStream,
    JoinEvent,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.plan import PlanTask
from llm_compiler.state import CompilerState
from llm_compiler.workflow import LLMCompilerWorkflow

__all__ = [
    "ChainOfAbstractionWorkflow",
    "CoAAgent",
    "CompilerStartEvent",
    "CompilerState",
    "CompilerStream",
    "ConfigurationError",
    "JoinEvent",
    "LLMCallError",
    "LLMCompilerAgent",
    "LLMCompilerError",
    "LLMCompilerWorkflow",
    "PlanEvent",
    "PlanTask",
    "ReplanEvent",
    "RunError",
    "TaskReady",
    "TaskResult",
]
