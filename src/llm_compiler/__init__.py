"""LLMCompiler: parallel function calling as an event-driven LlamaIndex workflow."""

from llm_compiler import _aliases
from llm_compiler.agents import CoAAgent, LLMCompilerAgent
from llm_compiler.config import CompilerConfig
from llm_compiler.dialects import LLMCompilerDialect, PlanDialect
from llm_compiler.dialects.coa.workflow import ChainOfAbstractionWorkflow
from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.summary import CompilerOutput, RunSummary, TaskSummary
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import ConfigurationError, LLMCallError, LLMCompilerError, RunError
from llm_compiler.events import (
    AwaitingApproval,
    CompiledPlan,
    CompilerStartEvent,
    CompilerStream,
    JoinEvent,
    PlanApprovalRequest,
    PlanApprovalResponse,
    PlanEvent,
    ReplanEvent,
    TaskApprovalRequest,
    TaskApprovalResponse,
    TaskReady,
    TaskResult,
    TaskStarted,
    TaskWaiting,
)
from llm_compiler.plan import PlanTask
from llm_compiler.serving.mermaid import to_mermaid
from llm_compiler.tools.calls import idempotency_key
from llm_compiler.tools.mcp_servers import MCPConnection, MCPServerError, tools_from_mcp
from llm_compiler.tools.policy import RetryPolicy, ToolPolicy, policy, with_policy

__all__ = [
    "AwaitingApproval",
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
    "MCPConnection",
    "MCPServerError",
    "PlanApprovalRequest",
    "PlanApprovalResponse",
    "PlanDialect",
    "PlanEvent",
    "PlanTask",
    "ReplanEvent",
    "RetryPolicy",
    "RunError",
    "RunSummary",
    "TaskApprovalRequest",
    "TaskApprovalResponse",
    "TaskReady",
    "TaskResult",
    "TaskStarted",
    "TaskSummary",
    "TaskWaiting",
    "ToolPolicy",
    "idempotency_key",
    "policy",
    "to_mermaid",
    "tools_from_mcp",
    "with_policy",
]

_aliases.install()
