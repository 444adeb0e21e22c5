"""Tool policies: lookups, two writes to one account that must not overlap, and a payment
that waits for a human and is never repeated.

Run: ``.venv/bin/python examples/policies.py`` (offline: a scripted planner and joiner
write the plan below, so it needs no model). ``--reject`` answers the payment with a
rejection, ``--ask`` asks you on the terminal. ``--model`` plans with the model
``make demo`` uses instead (a small model may plan something else).

The plan::

    1. balance("ACME")                    pure, retried up to 3 tries (its first try fails)
    2. rate("EUR")                        pure
    3. record("ACME", "invoice 42")       idempotent, resource key account:ACME
    4. record("ACME", "fee 2.50")         the same key: waits until 3 is done
    5. pay("ACME", 120)                   at_most_once, requires approval
    6. join()

Everything but the payment runs at once; the payment is held (its own approval id) until
the verdict, which this example gives when nothing else is left to run (an
``AwaitingApproval`` event); the two writes to ACME never overlap; the flaky lookup is
retried, and the payment never would be.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from llama_index.core.agent.workflow import AgentStream

from llm_compiler import (
    AwaitingApproval,
    LLMCompilerWorkflow,
    TaskApprovalRequest,
    TaskReady,
    TaskResult,
    TaskStarted,
    TaskWaiting,
    policy,
)
from llm_compiler.testing import ScriptedLLM

QUESTION = "Record ACME's invoice 42 and its fee, then pay ACME 120 EUR."
PLAN = """1. balance("ACME")
2. rate("EUR")
3. record("ACME", "invoice 42")
4. record("ACME", "fee 2.50")
5. pay("ACME", 120)
6. join()"""
FINISH = "Thought: every step has a result.\nAction: Finish({answer})"
#: Seconds a bank API call takes, and the retry's first backoff (its test sets both to 0).
LATENCY, BACKOFF = 0.2, 0.05


class Bank:
    """The example's tools, and a log of what they did (with times, to check overlaps)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float, float]] = []
        self.balance_tries = 0

    def tools(self) -> list[Any]:
        retry = {"attempts": 3, "backoff": BACKOFF, "on": ["ConnectionError"]}

        @policy(side_effect="pure", retry=retry)
        async def balance(account: str) -> float:
            """The balance of an account, in EUR."""
            self.balance_tries += 1
            if self.balance_tries == 1:
                raise ConnectionError("the bank's API reset the connection")
            return await self._timed(f"balance {account}", 1000.0)

        @policy(side_effect="pure")
        async def rate(currency: str) -> float:
            """The exchange rate of a currency to EUR."""
            return await self._timed(f"rate {currency}", 1.0)

        @policy(side_effect="idempotent", resource_keys=("account:{account}",))
        async def record(account: str, entry: str) -> str:
            """Append an entry to an account's ledger."""
            return await self._timed(f"record {account} {entry}", f"recorded {entry!r}")

        @policy(side_effect="at_most_once", requires_approval=True)
        async def pay(account: str, amount: float) -> str:
            """Pay an amount to an account (moves money: once, and only when approved)."""
            return await self._timed(f"pay {account} {amount:g}", f"paid {amount:g} EUR")

        return [balance, rate, record, pay]

    async def _timed(self, what: str, result: Any) -> Any:
        start = time.monotonic()
        await asyncio.sleep(LATENCY)  # as long as a request to a bank's API would take
        self.log.append((what, start, time.monotonic()))
        return result

    def overlapped(self, prefix: str) -> bool:
        """Whether two calls whose text starts with `prefix` ran at the same time."""
        spans = sorted((s, e) for what, s, e in self.log if what.startswith(prefix))
        return any(b[0] < a[1] for a, b in zip(spans, spans[1:], strict=False))


async def decide(request: TaskApprovalRequest, mode: str) -> dict[str, Any]:
    """The verdict on a held call: approve, reject, or ask on the terminal."""
    if mode == "ask":
        prompt = f"Approve {request.tool_name}({request.args})? [y/N] "
        answer = await asyncio.to_thread(input, prompt)
        mode = "approve" if answer.strip().lower().startswith("y") else "reject"
    if mode == "reject":
        return {"action": "reject", "reason": "not this month"}
    return {"action": "approve"}


def show(ev: Any) -> None:
    if isinstance(ev, TaskWaiting):
        print(f"  task {ev.task_id} {ev.tool_name}: waits for {ev.slot}")
    elif isinstance(ev, TaskApprovalRequest):
        print(f"  task {ev.task_id} {ev.tool_name}{tuple(ev.args.values())}: held for approval")
    elif isinstance(ev, TaskStarted) and ev.attempt > 1:
        print(f"  task {ev.task_id} {ev.tool_name}: try {ev.attempt} of {ev.attempts} ({ev.error})")
    elif isinstance(ev, TaskReady):
        print(f"  task {ev.task_id} {ev.tool_name}: runs ({ev.policy['side_effect']})")
    elif isinstance(ev, TaskResult):
        print(f"  task {ev.task_id} {ev.tool_name}: {'error: ' if ev.is_error else ''}{ev.output}")


async def main(mode: str = "approve", model: bool = False) -> dict[str, Any]:
    """Run the example; return what happened (for its test)."""
    bank = Bank()
    answer = "Recorded both entries; the payment " + (
        "was rejected." if mode == "reject" else "is done."
    )
    llm: Any = ScriptedLLM([PLAN, FINISH.format(answer=answer)])
    if model:
        from llm_compiler.models.resolve import resolve_llm

        llm = await resolve_llm().__aenter__()
    wf = LLMCompilerWorkflow(tools=bank.tools(), llm=llm)
    print(f"question: {QUESTION}")
    handler = wf.run(user_msg=QUESTION)
    held: list[str] = []
    waiting: dict[int, TaskApprovalRequest] = {}
    async for ev in handler.stream_events():
        if isinstance(ev, AgentStream):
            continue
        show(ev)
        if isinstance(ev, TaskApprovalRequest):
            held.append(ev.approval_id)
            waiting[ev.task_id] = ev
        elif isinstance(ev, AwaitingApproval):  # nothing else can run: time to decide
            print(f"  only held tasks are left: {ev.task_ids}")
            for task_id in ev.task_ids:
                request = waiting.pop(task_id)
                verdict = await decide(request, mode)
                print(f"  verdict on {request.approval_id}: {verdict['action']}")
                handler.ctx.send_event(request.respond(**verdict))
    out = await handler
    print(f"answer: {out}")
    writes_overlap = bank.overlapped("record ACME")
    print(f"the two writes to ACME overlapped: {'yes' if writes_overlap else 'no'}")
    return {
        "answer": str(out),
        "held": held,
        "log": [what for what, _, _ in bank.log],
        "writes_overlap": writes_overlap,
        "balance_tries": bank.balance_tries,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reject", action="store_true", help="reject the payment")
    parser.add_argument("--ask", action="store_true", help="ask on the terminal")
    parser.add_argument("--model", action="store_true", help="plan with the demo's model")
    args = parser.parse_args()
    chosen = "ask" if args.ask else "reject" if args.reject else "approve"
    asyncio.run(main(chosen, args.model))
    sys.exit(0)
