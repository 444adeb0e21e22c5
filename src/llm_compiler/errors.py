"""Errors raised by llm_compiler.

The tree::

    LLMCompilerError
    ├── ConfigurationError        a developer mistake (bad tool, bad option)
    │   └── LocalModelUnavailable the embedded model's packages or file are missing
    ├── LocalServerError          the embedded model's server exited or never listened
    │   └── LocalServerExited     it died while serving: exit code or signal, last output
    ├── RunError                  a run could not finish
    │   └── LLMCallError          the planner or joiner LLM call failed
    ├── MCPServerError            an MCP server failed to start, answer or stay connected
    │                             (llm_compiler.tools.mcp.connection)
    ├── ToolError                 a tool reported a failure in its result
    ├── NotFound                  a tool found nothing for its arguments; also a LookupError
    ├── TaskFailed                a task's error observation, as its span's exception
    │                             (llm_compiler.tracing.tracer)
    ├── PlanLineError             a plan line that cannot become a task; also a ValueError
    │                             (llm_compiler.dialects.arguments)
    └── RequestError              a request the server answers itself: status and detail
        ├── BadRequest            a body or start request it refuses (serving.guard)
        ├── Refused               a host, origin or token it refuses (serving.security)
        └── Unavailable           a new run refused at the door: the store does not
                                  answer, or the worker drains (503; nothing started)

Plan problems (unparseable lines, unknown tools, bad references) and tool failures never
leave a run: ``PlanLineError``, ``ToolError`` and ``MCPServerError`` raised inside it
become error observations that the joiner reads and can replan on.
"""

from __future__ import annotations

import pickle
from typing import Any


class LLMCompilerError(Exception):
    """Root of every error raised by llm_compiler.

    Every error survives pickling (durable runs store a failed run's error that way) with
    its fields, whatever its constructor takes; a `cause` that cannot be pickled comes back
    as a RuntimeError with the same text.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        state = {k: _picklable(v) for k, v in self.__dict__.items()}
        return (_restore, (type(self), self.args, state))


def _picklable(value: object) -> object:
    if not isinstance(value, BaseException):
        return value
    try:
        pickle.loads(pickle.dumps(value))
    except Exception:  # noqa: BLE001 - any failure to round-trip
        return RuntimeError(f"{type(value).__name__}: {value}")
    return value


def _restore(cls: type[LLMCompilerError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ConfigurationError(LLMCompilerError):
    """The compiler was configured wrongly (for example two tools with one name)."""


class RunError(LLMCompilerError):
    """A run could not finish."""


class LLMCallError(RunError):
    """The planner or joiner LLM call failed; `phase` says which, `round` when."""

    def __init__(self, phase: str, round: int, cause: BaseException) -> None:
        super().__init__(
            f"The {phase} LLM call of round {round} failed: {type(cause).__name__}: {cause}"
        )
        self.phase = phase
        self.round = round
        self.cause = cause


class LocalModelUnavailable(ConfigurationError):
    """The embedded model cannot run: llama-cpp-python, the model package or file is missing."""


class LocalServerError(LLMCompilerError):
    """The llama.cpp server exited or did not become ready; the message has its last output."""


class LocalServerExited(LocalServerError):
    """The embedded model's llama.cpp server died; `returncode` is negative for a signal.

    Raised in place of the transport error (a closed connection) that its death causes.
    """

    def __init__(self, message: str, returncode: int | None, output_tail: str) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.output_tail = output_tail


class ToolError(LLMCompilerError):
    """A tool reported a failure in its result (an MCP ``isError``, a failed ``ToolOutput``)."""


class NotFound(LLMCompilerError, LookupError):
    """Raised by a tool that found nothing for its arguments (no such city, no such file).

    The engine reads it as a fact: the observation is ``Error: NotFound: <message>``, a
    replan may try other arguments, and an answer says what could not be found. Any
    other exception means the tool failed (a timeout, ``ConnectionError("HTTP 503")``).
    """

    def __init__(self, message: str = "nothing found") -> None:
        super().__init__(message)


class RequestError(LLMCompilerError):
    """A request the server answers itself with `status` and `detail` (its message)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class Unavailable(RequestError):
    """A new run refused at the door (503): its store does not answer, or its worker
    drains. Nothing was started, so a retry starts the run once."""

    retry_after = 5
    """Seconds a client is told to wait before retrying."""

    def __init__(self, detail: str) -> None:
        super().__init__(503, detail)
