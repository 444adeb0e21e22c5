"""Tool policies: what a tool's side effects are and how its calls may run.

A :class:`ToolPolicy` is declared once, on the tool: with the :func:`policy` decorator on
a plain callable, :func:`with_policy` on any llama-index tool (a ``SchemaTool`` included),
per MCP server or per MCP tool (``MCPConnection(..., policy=..., tool_policies=...,
max_concurrency=...)``), or by tool name in a workflow's configuration
(``CompilerConfig.tool_policies``, which ``llm-compiler serve --tool-policies FILE`` fills).
The engine reads it when it schedules and runs a call (:mod:`llm_compiler.engine.policy`).

The side-effect class says what running a call twice does:

- ``pure``: nothing outside (a lookup). Retried per its policy; run again after a crash.
- ``idempotent``: an effect that the same call repeats harmlessly given the same
  idempotency key (an upsert). Retried; run again after a crash with the same key.
- ``at_most_once`` (the default): an effect that must not happen twice (a payment). Never
  retried automatically; after a crash in flight its outcome is "unknown", an error
  observation the joiner or a human decides on.

The default is ``at_most_once`` because the engine cannot know what an undeclared tool
does: guessing wrong that way costs one error observation after a crash (and no automatic
retry), guessing wrong the other way repeats a refund or an email. Declare ``pure`` on
lookups to have them retried and re-run.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from llm_compiler.errors import ConfigurationError

SideEffect = Literal["pure", "idempotent", "at_most_once"]
KeyFn = Callable[[Mapping[str, Any]], "str | Iterable[str]"]
_ATTR = "__llm_compiler_policy__"
_T = TypeVar("_T")


class RetryPolicy(BaseModel):
    """How often a failed call is tried again, after what wait, and on which errors.

    Attributes:
        attempts: Tries in all (1: no retry). An ``at_most_once`` tool is tried once
            whatever this says.
        backoff: Seconds before the second try; each later wait is ``factor`` times the
            one before, at most ``max_backoff``.
        on: Names of the exception classes retried (matched against the error's class and
            its bases, e.g. ``TimeoutError``, ``ConnectionError``; ``ToolError`` is a tool
            output that reports a failure). Invalid arguments are never retried.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=1, ge=1, le=100)
    backoff: float = Field(default=0.0, ge=0)
    factor: float = Field(default=2.0, ge=1)
    max_backoff: float = Field(default=60.0, ge=0)
    on: tuple[str, ...] = ("Exception",)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number `attempt` (1-based)."""
        return float(min(self.max_backoff, self.backoff * self.factor ** (attempt - 1)))

    def retries(self, error: BaseException) -> bool:
        """Whether `error` is one this policy retries."""
        names = {c.__name__ for c in type(error).__mro__}
        return any(n in names for n in self.on)


class ToolPolicy(BaseModel):
    """How a tool's calls may run (see the module docstring for the side-effect classes).

    Attributes:
        side_effect: ``pure``, ``idempotent`` or ``at_most_once`` (default).
        requires_approval: Each call waits for a human's verdict (approve, edit its
            arguments, reject) when its inputs are ready; the rest of the plan runs on.
        max_concurrency: Most calls of this tool running at once in a run (None: no own
            limit).
        resource_keys: Keys of what a call touches; two calls sharing a key never overlap.
            A key may name arguments as ``str.format`` fields (``"account:{account_id}"``);
            a key whose field is missing is kept as written (those calls then all share it).
        key_fn: Computes more keys from the call's arguments (not serialized).
        limits: Named limits shared with other tools, name -> most calls at once (e.g. one
            MCP server's tools: ``{"mcp:weather": 2}``; the smallest declared wins).
        retry: The retry policy (by default, no retry).
        timeout: Seconds per try (None: the run's ``tool_timeout``).
        cache: Whether a call's result may be served again instead of calling the tool
            (None: for ``pure`` tools only; True also for an ``idempotent`` one; never for
            ``at_most_once``). Within a run the same call then runs once; see
            :mod:`llm_compiler.engine.cache`.
        cache_ttl: Seconds a result is also served to later runs (None: within its own
            run only).
        version: The tool's version, part of every cache key: change it when the tool
            starts answering the same call differently.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    side_effect: SideEffect = "at_most_once"
    requires_approval: bool = False
    max_concurrency: int | None = Field(default=None, ge=1)
    resource_keys: tuple[str, ...] = ()
    key_fn: KeyFn | None = Field(default=None, exclude=True)
    limits: dict[str, int] = Field(default_factory=dict)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    timeout: float | None = Field(default=None, gt=0)
    cache: bool | None = None
    cache_ttl: float | None = Field(default=None, gt=0)
    version: str = ""

    @field_validator("limits")
    @classmethod
    def _positive_limits(cls, limits: dict[str, int]) -> dict[str, int]:
        bad = [k for k, v in limits.items() if v < 1]
        if bad:
            raise ValueError(f"limits must be at least 1 (not for {', '.join(bad)})")
        return limits

    @model_validator(mode="after")
    def _cache_fits_the_side_effect(self) -> ToolPolicy:
        if self.side_effect == "at_most_once" and (self.cache or self.cache_ttl is not None):
            raise ValueError("an at_most_once tool's results are never served from a cache")
        if self.side_effect == "idempotent" and self.cache_ttl is not None and not self.cache:
            raise ValueError("cache_ttl on an idempotent tool needs cache=True")
        return self

    @property
    def cacheable(self) -> bool:
        """Whether a call's result may be served again: a ``pure`` tool's unless ``cache``
        is False, an ``idempotent`` one's only if ``cache`` is True."""
        if self.side_effect == "pure":
            return self.cache is not False
        return self.side_effect == "idempotent" and self.cache is True

    @property
    def attempts(self) -> int:
        """Tries a failing call gets: 1 for ``at_most_once``, else the retry policy's."""
        return 1 if self.side_effect == "at_most_once" else self.retry.attempts

    def keys(self, args: Mapping[str, Any]) -> tuple[str, ...]:
        """The resource keys of a call with `args`, sorted and without repeats."""
        keys = {_format(k, args) for k in self.resource_keys}
        if self.key_fn is not None:
            computed = self.key_fn(args)
            keys.update([computed] if isinstance(computed, str) else map(str, computed))
        return tuple(sorted(keys))

    def shown(self) -> dict[str, Any]:
        """The policy as JSON (for events, the compiled plan and the page)."""
        data = self.model_dump(mode="json")
        if self.key_fn is not None:
            data["key_fn"] = getattr(self.key_fn, "__name__", "key_fn")
        return data


DEFAULT_POLICY = ToolPolicy()


def _format(template: str, args: Mapping[str, Any]) -> str:
    fields = [f for _, f, _, _ in string.Formatter().parse(template) if f]
    if not fields or not all(f in args for f in fields):
        return template
    try:
        return template.format_map({k: args[k] for k in fields})
    except (ValueError, KeyError, IndexError, AttributeError):
        return template


def declared(obj: Any) -> ToolPolicy | None:
    """The policy declared on a tool or callable, if any."""
    found = getattr(obj, _ATTR, None)
    return found if isinstance(found, ToolPolicy) else None


def with_policy(obj: _T, policy: ToolPolicy | None = None, **fields: Any) -> _T:
    """Declare `obj`'s policy (a tool or callable; returned as it is, now carrying it).

    Give a :class:`ToolPolicy`, or its fields (``side_effect="pure", retry={...}``).
    """
    chosen = make_policy(policy, fields)
    try:
        setattr(obj, _ATTR, chosen)
    except (AttributeError, TypeError):
        raise ConfigurationError(f"{obj!r} cannot carry a policy; wrap it in a function.") from None
    return obj


def policy(policy: ToolPolicy | None = None, **fields: Any) -> Callable[[_T], _T]:
    """Decorator form of :func:`with_policy`: ``@policy(side_effect="pure")``."""
    chosen = make_policy(policy, fields)
    return lambda obj: with_policy(obj, chosen)


def make_policy(policy: ToolPolicy | None, fields: Mapping[str, Any]) -> ToolPolicy:
    """`policy`, or one made of `fields`; both is a ``ConfigurationError``."""
    if policy is not None and fields:
        raise ConfigurationError("Give a ToolPolicy or its fields, not both.")
    if policy is not None:
        return policy
    try:
        return ToolPolicy.model_validate(dict(fields))
    except ValueError as e:
        raise ConfigurationError(f"Invalid tool policy: {e}") from None


def load_policies(data: Any) -> dict[str, ToolPolicy]:
    """Policies by tool name from JSON data ``{"tool": {"side_effect": "pure", ...}}``."""
    if not isinstance(data, Mapping):
        raise ConfigurationError('Tool policies are a JSON object {"tool_name": {...}}.')
    out = {}
    for name, fields in data.items():
        if not isinstance(fields, Mapping):
            raise ConfigurationError(f"The policy of {name!r} must be a JSON object.")
        try:
            out[str(name)] = ToolPolicy.model_validate(dict(fields))
        except ValueError as e:
            raise ConfigurationError(f"Invalid policy for {name!r}: {e}") from None
    return out


def mcp_policy(annotations: Any) -> ToolPolicy | None:
    """The side-effect class an MCP tool's annotations state, if they state one:
    ``readOnlyHint`` -> pure, ``idempotentHint`` -> idempotent (read as the SDK's
    ``read_only_hint``/``idempotent_hint`` attributes, or camel-case ones)."""
    if annotations is None:
        return None
    if _hint(annotations, "read_only_hint", "readOnlyHint"):
        return ToolPolicy(side_effect="pure")
    if _hint(annotations, "idempotent_hint", "idempotentHint"):
        return ToolPolicy(side_effect="idempotent")
    return None


def _hint(annotations: Any, *names: str) -> bool:
    """Whether an annotation named one of `names` is ``True``."""
    return any(getattr(annotations, name, None) is True for name in names)
    if getattr(annotations, "readOnlyHint", None) is True:
        return ToolPolicy(side_effect="pure")
    if getattr(annotations, "idempotentHint", None) is True:
        return ToolPolicy(side_effect="idempotent")
    return None
