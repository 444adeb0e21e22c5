"""The ownership protocol as a state machine (hypothesis), several workers in this process
on one real Postgres: runs created, claimed, let go, taken over; events written to their
streams; at-most-once starts; events sent through the inbox and drained; lock
connections terminated (peers may take the worker for dead meanwhile); workers crashed
(nothing committed of what they queued) and replaced.

Invariants after every step: no at-most-once call started twice; one writer per run (at
most one live worker holds the run's current epoch); no inbox event lost: each one is
either still in the inbox or its effect is recorded, once (an event handed to an owner
that is taken for dead before it recorded the effect is handed to the next owner); every
stream numbered 0, 1, 2... without gap, its events written by holders of ever newer
epochs. ``LLMC_OWNERSHIP_SEED`` replays
a seed (printed); ``LLMC_OWNERSHIP_STEPS`` sets the steps per example.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import uuid
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

asyncpg = pytest.importorskip("asyncpg")

from llm_compiler.durable.backend import Durable, prepare  # noqa: E402
from llm_compiler.durable.facts import Row  # noqa: E402
from llm_compiler.durable.journal import RunRecord  # noqa: E402
from llm_compiler.durable.store import _DRAIN  # noqa: E402

pytestmark = pytest.mark.timeout(300)
SEED = int(os.environ.get("LLMC_OWNERSHIP_SEED") or random.SystemRandom().randrange(2**32))
STEPS = int(os.environ.get("LLMC_OWNERSHIP_STEPS", "15"))
WORKERS = 3


class Node:
    """One worker: its backend, and what it believes it holds."""

    def __init__(self, durable: Durable) -> None:
        self.durable = durable
        self.back = asyncio.Event()
        """Cleared: this worker's lock connection cannot reconnect (a slow reconnect)."""
        self.back.set()
        liveness: Any = durable.liveness
        connect = liveness._connect

        async def slow() -> Any:
            await self.back.wait()
            return await connect()

        liveness._connect = slow
        self.next: dict[str, int] = {}
        """Per run held here: the number of its next stream event."""
        self.handed: dict[str, dict[int, str]] = {}
        """Per run held here: the inbox rows handed to it (id: event) not taken in yet."""

    @property
    def journal(self) -> Any:
        return self.durable.journal

    def holds(self, run_id: str) -> bool:
        return run_id in self.next and run_id in self.journal.epochs


async def abandon(durable: Durable) -> None:
    """kill -9, in process: nothing more is committed, every connection drops."""
    journal, liveness = durable.journal, durable.liveness
    if journal._flusher is not None:
        journal._flusher.cancel()
        await asyncio.gather(journal._flusher, return_exceptions=True)
    await journal.driver.close()
    liveness._stopping = True  # type: ignore[attr-defined]
    for task in [*liveness._watchers.values(), liveness._keeper]:  # type: ignore[attr-defined]
        if task is not None:
            task.cancel()
    if liveness._conn is not None:  # type: ignore[attr-defined]
        liveness._conn.terminate()  # type: ignore[attr-defined]


class Ownership(RuleBasedStateMachine):
    """Workers, runs, events and faults (see the module); `database` is set by the test."""

    database = ""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.nodes: list[Node] = []
        self.runs: list[str] = []
        self.called: Counter[tuple[str, str]] = Counter()
        self.sent: dict[str, str] = {}
        self.recorded: Counter[str] = Counter()
        self.observer: Any = None
        for _ in range(WORKERS):
            self.nodes.append(self.do(self.spawn()))

    def do(self, work: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(work, 60))

    async def spawn(self) -> Node:
        durable = prepare(self.database, worker=f"w-{uuid.uuid4().hex[:6]}")
        await durable.start()
        return Node(durable)

    async def sql(self, query: str, *args: Any) -> list[Any]:
        if self.observer is None or self.observer.is_closed():
            self.observer = await asyncpg.connect(self.database)
        return list(await self.observer.fetch(query, *args))

    def teardown(self) -> None:
        for node in self.nodes:
            node.back.set()
            self.do(node.durable.stop())
        if self.observer is not None:
            self.observer.terminate()
        self.loop.run_until_complete(self.settle())
        self.loop.close()

    async def settle(self) -> None:
        """Cancel what is left (watchers, reconnects) and let closed transports close."""
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in rest:
            task.cancel()
        await asyncio.gather(*rest, return_exceptions=True)
        await asyncio.sleep(0.05)

    # ------------------------------------------------------------ steps

    @rule(w=st.integers(0, WORKERS - 1))
    def new_run(self, w: int) -> None:
        node, run_id = self.nodes[w], uuid.uuid4().hex

        async def create() -> None:
            node.journal.hold(run_id, 1)
            owner = node.durable.worker
            node.journal.put_run(RunRecord(run_id, run_id, "m", owner=owner, epoch=1))
            node.journal.put(run_id, Row("start", "", "{}"))
            await node.journal.barrier(run_id)

        self.do(create())
        node.next[run_id] = 0
        self.runs.append(run_id)

    async def taken(self, node: Node, run_id: str) -> None:
        rows = await node.journal.fetch("SELECT max(seq) FROM llmc_events WHERE run_id = ?", run_id)
        node.next[run_id] = -1 if rows[0][0] is None else int(rows[0][0])
        node.next[run_id] += 1
        node.handed[run_id] = {}

    @rule(w=st.integers(0, WORKERS - 1))
    def claim(self, w: int) -> None:
        node = self.nodes[w]

        async def claim() -> None:
            for record in await node.durable.claim(None):
                await self.taken(node, record.run_id)

        self.do(claim())

    @precondition(lambda self: self.runs)
    @rule(w=st.integers(0, WORKERS - 1), pick=st.integers(0, 999))
    def take(self, w: int, pick: int) -> None:
        node, run_id = self.nodes[w], self.runs[pick % len(self.runs)]

        async def take() -> None:
            if await node.durable.take(run_id) is not None:
                await self.taken(node, run_id)

        self.do(take())

    def held(self, w: int, pick: int) -> tuple[Node, str] | None:
        node = self.nodes[w]
        mine = sorted(r for r in node.next if node.holds(r))
        return (node, mine[pick % len(mine)]) if mine else None

    @rule(
        w=st.integers(0, WORKERS - 1),
        pick=st.integers(0, 999),
        idle=st.booleans(),
    )
    def let_go(self, w: int, pick: int, idle: bool) -> None:
        found = self.held(w, pick)
        if found is not None:
            node, run_id = found
            if idle:  # a run waits for input once it took in what it was handed
                self.do(self.quietly(self.take_in_all(node, run_id)))
            self.do(self.quietly(node.durable.let_go(run_id, 1.0 if idle else None)))
            node.next.pop(run_id, None)
            node.handed.pop(run_id, None)

    async def quietly(self, work: Any) -> bool:
        """Whether `work` went through (a fenced write raises: the run stopped here)."""
        try:
            await work
        except Exception:
            return False
        return True

    @rule(w=st.integers(0, WORKERS - 1), pick=st.integers(0, 999))
    def write(self, w: int, pick: int) -> None:
        found = self.held(w, pick)
        if found is None:
            return
        node, run_id = found
        seq = node.next[run_id]
        node.next[run_id] = seq + 1

        body = json.dumps({"epoch": node.journal.epochs.get(run_id)})

        async def write() -> None:
            node.journal.put_event(run_id, seq, 0.0, body)
            node.journal.put(run_id, Row("log", str(seq), "{}"))
            await node.journal.barrier(run_id)

        if not self.do(self.quietly(write())):
            node.next.pop(run_id, None)

    @rule(
        w=st.integers(0, WORKERS - 1),
        pick=st.integers(0, 999),
        key=st.sampled_from(["0:1", "0:2"]),
    )
    def start_call(self, w: int, pick: int, key: str) -> None:
        found = self.held(w, pick)
        if found is None:
            return
        node, run_id = found

        async def start() -> None:
            node.journal.put(run_id, Row("started", key, "{}"))
            await node.journal.barrier(run_id)

        if self.do(self.quietly(start())):
            self.called[(run_id, key)] += 1  # the call starts now

    @precondition(lambda self: self.runs)
    @rule(w=st.integers(0, WORKERS - 1), pick=st.integers(0, 999))
    def send(self, w: int, pick: int) -> None:
        run_id, event = self.runs[pick % len(self.runs)], uuid.uuid4().hex
        self.do(
            self.nodes[w].journal.fetch(
                "INSERT INTO llmc_inbox (run_id, body) VALUES (?, ?)", run_id, event
            )
        )
        self.sent[event] = run_id

    @rule(w=st.integers(0, WORKERS - 1), pick=st.integers(0, 999))
    def drain(self, w: int, pick: int) -> None:
        found = self.held(w, pick)
        if found is None:
            return
        node, run_id = found
        epoch = node.journal.epochs.get(run_id)
        if epoch is None:
            return
        sql = _DRAIN.format(lock=" FOR SHARE")
        for inbox_id, body in self.do(node.journal.fetch(sql, run_id, epoch)):
            node.handed.setdefault(run_id, {})[int(inbox_id)] = str(body)

    async def take_in_all(self, node: Node, run_id: str) -> None:
        """The run takes in what it was handed: each event's effect (a fact) and the
        deletion of its inbox row, in one fenced commit."""
        handed = node.handed.get(run_id, {})
        epoch = node.journal.epochs.get(run_id)
        for inbox_id, event in handed.items():
            node.journal.put(run_id, Row("effect", f"{event}:{epoch}", "{}"))
            node.journal.took(run_id, inbox_id)
        await node.journal.barrier(run_id)
        for event in handed.values():
            self.recorded[event] += 1
        handed.clear()

    @rule(w=st.integers(0, WORKERS - 1), pick=st.integers(0, 999))
    def take_in(self, w: int, pick: int) -> None:
        found = self.held(w, pick)
        if found is not None:
            node, run_id = found
            if not self.do(self.quietly(self.take_in_all(node, run_id))):
                node.handed.pop(run_id, None)  # fenced: the next owner gets them

    @rule(w=st.integers(0, WORKERS - 1), slow=st.booleans())
    def drop_lock(self, w: int, slow: bool) -> None:
        node = self.nodes[w]
        if slow:  # it reconnects at a later `reconnect` step
            node.back.clear()
        conn = node.durable.liveness._conn  # type: ignore[attr-defined]
        if conn is not None and not conn.is_closed():
            self.do(self.sql("SELECT pg_terminate_backend($1)", conn.get_server_pid()))
        self.do(asyncio.sleep(0.05))  # its reconnect and its peers' watchers race

    @rule(w=st.integers(0, WORKERS - 1))
    def reconnect(self, w: int) -> None:
        self.nodes[w].back.set()
        self.do(asyncio.sleep(0.05))

    @rule(w=st.integers(0, WORKERS - 1))
    def crash(self, w: int) -> None:
        self.do(abandon(self.nodes[w].durable))
        self.nodes[w] = self.do(self.spawn())

    # ------------------------------------------------------------ invariants

    @invariant()
    def no_call_started_twice(self) -> None:
        twice = {k: n for k, n in self.called.items() if n > 1}
        assert not twice, twice

    @invariant()
    def one_writer_per_run(self) -> None:
        if not self.runs:
            return
        rows = self.do(
            self.sql("SELECT run_id, epoch FROM llmc_runs WHERE run_id = ANY($1)", self.runs)
        )
        for run_id, epoch in rows:
            writers = [n for n in self.nodes if n.journal.epochs.get(run_id) == epoch]
            assert len(writers) <= 1, (run_id, epoch)

    @invariant()
    def no_event_lost(self) -> None:
        if not self.sent:
            return
        waiting = {
            str(b)
            for (b,) in self.do(
                self.sql("SELECT body FROM llmc_inbox WHERE body = ANY($1)", list(self.sent))
            )
        }
        effects = Counter(
            str(k).rsplit(":", 1)[0]
            for (k,) in self.do(self.sql("SELECT key FROM llmc_facts WHERE kind = 'effect'"))
        )
        for event in self.sent:  # waiting, or its effect recorded (once, by one owner)
            assert effects[event] + (event in waiting) == 1, (event, effects[event])
            assert self.recorded[event] == effects[event], event

    @invariant()
    def events_wait_for_a_live_owner(self) -> None:
        """An event handed at the run's current epoch to a live worker is held by that
        worker (it takes it in, or the run's next owner gets it again; a dead worker's
        runs get new epochs when a peer releases them)."""
        live = [n.durable.worker for n in self.nodes]
        rows = self.do(
            self.sql(
                "SELECT i.id, r.run_id, r.epoch FROM llmc_inbox i JOIN llmc_runs r"
                " USING (run_id) WHERE i.taken = r.epoch AND r.owner = ANY($1)",
                live,
            )
        )
        for inbox_id, run_id, epoch in rows:
            holders = [
                n
                for n in self.nodes
                if n.journal.epochs.get(run_id) == epoch and inbox_id in n.handed.get(run_id, {})
            ]
            assert holders, (run_id, epoch, inbox_id)

    @invariant()
    def streams_have_no_gap(self) -> None:
        if not self.runs:
            return
        rows = self.do(
            self.sql(
                "SELECT run_id, array_agg(seq ORDER BY seq), array_agg(body ORDER BY seq)"
                " FROM llmc_events"
                " WHERE run_id = ANY($1) GROUP BY run_id",
                self.runs,
            )
        )
        for run_id, seqs, bodies in rows:
            assert list(seqs) == list(range(len(seqs))), (run_id, seqs)
            # One writer at a time: each event was written by the holder of an epoch
            # no older than the events before it.
            epochs = [json.loads(b)["epoch"] for b in bodies]
            assert epochs == sorted(epochs), (run_id, epochs)


def test_ownership_protocol_holds_under_faults(database: str) -> None:
    print(f"ownership seed {SEED} (replay: LLMC_OWNERSHIP_SEED={SEED})")  # noqa: T201
    options = settings(
        max_examples=int(os.environ.get("LLMC_OWNERSHIP_EXAMPLES", "4")),
        stateful_step_count=STEPS,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],  # a failure prints its steps; no shrinking
    )
    Ownership.database = database
    run_state_machine_as_test(seed(SEED)(Ownership), settings=options)
