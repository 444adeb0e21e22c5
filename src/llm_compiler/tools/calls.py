"""The tool call being run, for tools that deduplicate their side effects.

A durable run calls an ``idempotent`` (or ``pure``) tool in flight when its process died
once more when the run resumes. Every attempt of a call has the same key,
``run_id:round:task_id``, so a tool with side effects (a payment, an e-mail) can record
the key with its effect and return the recorded result the second time::

    from llm_compiler import idempotency_key, policy

    @policy(side_effect="idempotent")
    def pay(amount: float) -> str:
        key = idempotency_key()          # None when called outside a run
        return ledger.pay_once(key, amount)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_KEY: ContextVar[str | None] = ContextVar("llm_compiler_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """The stable key of the tool call being run (``run_id:round:task_id``), or None
    outside one. Sync tools see it too (their threads run in a copy of the context)."""
    return _KEY.get()


@contextmanager
def calling(key: str) -> Iterator[None]:
    """Run the block as the call with `key` (the executor wraps each tool call in it)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)
