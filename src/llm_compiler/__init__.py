"""LLMCompiler: parallel function calling as an event-driven LlamaIndex workflow."""

from llm_compiler.agents import CoAAgent, LLMCompilerAgent
from llm_compiler.config import CompilerConfig
from llm_compiler.dialects import (
    JsonPlanDialect,
    LLMCompilerDialect,
    PlanDialect,
    PlannerContext,
    PlanStream,
)
from llm_compiler.dialects.base import JoinerDecision, LLMRequest
from llm_compiler.dialects.coa import CoADialect
from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.summary import CompilerOutput, RunSummary, TaskSummary
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import (
    ConfigurationError,
    LLMCallError,
    LLMCompilerError,
    LocalModelUnavailable,
    LocalServerError,
    LocalServerExited,
    RunError,
)
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
from llm_compiler.models.resolve import resolve_llm
from llm_compiler.plan import PlanTask
from llm_compiler.presets import ChainOfAbstractionWorkflow
from llm_compiler.serving.mermaid import to_mermaid
from llm_compiler.tools.calls import idempotency_key
from llm_compiler.tools.mcp import MCPConnection, MCPServerError, tools_from_mcp
from llm_compiler.tools.policy import RetryPolicy, ToolPolicy, policy, with_policy
from llm_compiler.tuning import tune_for_many_runs

__all__ = [
    "AwaitingApproval",
    "ChainOfAbstractionWorkflow",
    "CoAAgent",
    "CoADialect",
    "CompiledPlan",
    "CompilerConfig",
    "CompilerOutput",
    "CompilerStartEvent",
    "CompilerState",
    "CompilerStream",
    "ConfigurationError",
    "JoinEvent",
    "JoinerDecision",
    "JsonPlanDialect",
    "LLMCallError",
    "LLMCompilerAgent",
    "LLMCompilerDialect",
    "LLMCompilerError",
    "LLMCompilerWorkflow",
    "LLMRequest",
    "LocalModelUnavailable",
    "LocalServerError",
    "LocalServerExited",
    "MCPConnection",
    "MCPServerError",
    "PlanApprovalRequest",
    "PlanApprovalResponse",
    "PlanDialect",
    "PlanEvent",
    "PlanStream",
    "PlanTask",
    "PlannerContext",
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
    "resolve_llm",
    "to_mermaid",
    "tools_from_mcp",
    "tune_for_many_runs",
    "with_policy",
]
