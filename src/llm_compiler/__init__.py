"""LLMCompiler: parallel function calling as an event-driven LlamaIndex workflow."""

from llm_compiler.agent import LLMCompilerAgent
from llm_compiler.coa import ChainOfAbstractionWorkflow, CoAAgent
from llm_compiler.config import CompilerConfig
from llm_compiler.dialects import LLMCompilerDialect, PlanDialect
from llm_compiler.errors import ConfigurationError, LLMCallError, LLMCompilerError, RunError
from llm_compiler.events import (
    CompiledPlan,
    CompilerStartEvent,
    CompilerStream,
    JoinEvent,
    PlanApprovalRequest,
    PlanApprovalResponse,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.mermaid import to_mermaid
from llm_compiler.plan import PlanTask
from llm_compiler.state import CompilerState
from llm_compiler.summary import CompilerOutput, RunSummary, TaskSummary
from llm_compiler.workflow import LLMCompilerWorkflow

__all__ = [
    "ChainOfAbstractionWorkflow",
    "CoAAgent",
    "CompiledPlan",
    "CompilerConfig",
    "CompilerOutput",
    "CompilerStartEvent",
    "CompilerState",
    "CompilerStream",
    "ConfigurationError",
    "JoinEvent",
    "LLMCallError",
    "LLMCompilerAgent",
    "LLMCompilerDialect",
    "LLMCompilerError",
    "LLMCompilerWorkflow",
    "PlanApprovalRequest",
    "PlanApprovalResponse",
    "PlanDialect",
    "PlanEvent",
    "PlanTask",
    "ReplanEvent",
    "RunError",
    "RunSummary",
    "TaskReady",
    "TaskResult",
    "TaskSummary",
    "to_mermaid",
]
