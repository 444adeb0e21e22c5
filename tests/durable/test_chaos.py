"""Chaos, bounded: real ``llm-compiler serve`` workers on one real Postgres (loopback).

Workers are started together on an empty database; runs (every tool ``at_most_once``)
are submitted through random workers while, in a random order, a worker is killed with
-9 and replaced, a worker is stopped (SIGSTOP) and resumed, a worker's lock connection
is terminated, and Postgres restarts. A client reads a run's stream while this goes on
and reconnects later with ``Last-Event-ID``. Checked from the tools' own logs and the
streams: every run ends with the answer; no at-most-once call (by its idempotency key)
ran twice; every stream is numbered 0, 1, 2... without gap or repeat and ends with the
answer; what a client read before is a prefix of the history, and its reconnect gets
exactly the rest.

The seed is random and printed; ``LLMC_CHAOS_SEED=<seed>`` replays one;
``LLMC_CHAOS_ROUNDS`` sets the number of faults (``make chaos`` runs it many times).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .conftest import Calls, Worker
from .crash_app import ANSWER
from .test_crash import answer_of

pytestmark = pytest.mark.timeout(240)
SEED = int(os.environ.get("LLMC_CHAOS_SEED") or random.SystemRandom().randrange(2**32))
ROUNDS = int(os.environ.get("LLMC_CHAOS_ROUNDS", "4"))
WORKERS = 3
TOOLS = "fetch,slow,combine"  # all at_most_once


class Crowd:
    """The live workers; a replacement for each one killed."""

    def __init__(self, database: str, calls: Calls, tmp: Path, started: list[Worker]) -> None:
        self.database, self.calls, self.tmp, self.started = database, calls, tmp, started
        self.live: list[Worker] = []

    def spawn(self, count: int) -> None:
        env = {"LLMC_KEYS": str(self.tmp / "keys.log")}
        new = [
            Worker(
                self.database,
                self.calls,
                "--outage-limit",
                "60",
                slow=0.4,
                undeclared=TOOLS,
                wait=False,
                env=env,
                log=self.tmp / "workers.log",
            )
            for _ in range(count)
        ]
        for worker in new:  # started together, then waited for
            worker.ready()
        self.started += new
        self.live += new

    def any(self, rng: random.Random) -> Worker:
        return rng.choice(self.live)

    def request(self, rng: random.Random, call: Any) -> Any:
        """`call(worker)` through a random live worker, another if it does not answer."""
        for worker in rng.sample(self.live, len(self.live)) * 3:
            try:
                return call(worker)
            except (httpx.HTTPError, AssertionError):
                time.sleep(0.3)
        raise AssertionError("no worker answered")


def sse(worker: Worker, handler: str, last: int | None = None, stop: int | None = None) -> list:
    """(id, type) of the run's events from the start, or after `last` (``Last-Event-ID``),
    to the answer (or `stop` events)."""
    headers = {} if last is None else {"Last-Event-ID": str(last)}
    params = {"include_internal": "true", "after_sequence": -1}  # the header overrides it
    out: list[tuple[int, str]] = []
    seq = -1
    with worker.client.stream(
        "GET", f"/events/{handler}", params=params, headers=headers, timeout=60
    ) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("id:"):
                seq = int(line.split(":", 1)[1])
            elif line.startswith("data:"):
                out.append((seq, json.loads(line[5:])["type"]))
                if out[-1][1] == "StopEvent" or (stop is not None and len(out) >= stop):
                    break
    return out


def fault(kind: str, crowd: Crowd, cluster: Any, rng: random.Random) -> None:
    if kind == "kill":
        victim = crowd.any(rng)
        crowd.live.remove(victim)
        victim.kill()
        crowd.spawn(1)
    elif kind == "stop":
        victim = crowd.any(rng)
        victim.proc.send_signal(signal.SIGSTOP)
        time.sleep(rng.uniform(1.0, 3.0))
        victim.proc.send_signal(signal.SIGCONT)
    elif kind == "lock":
        import psycopg

        with psycopg.connect(crowd.database, autocommit=True) as db:
            pids = [
                p
                for (p,) in db.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                )
            ]
            if pids:
                db.execute("SELECT pg_terminate_backend(%s)", (rng.choice(pids),))
    else:
        cluster.restart()


def test_runs_survive_chaos(cluster, calls: Calls, workers, tmp_path: Path) -> None:
    print(f"chaos seed {SEED} (replay: LLMC_CHAOS_SEED={SEED})")  # noqa: T201
    rng = random.Random(SEED)
    database = cluster.new_database()
    crowd = Crowd(database, calls, tmp_path, workers)
    crowd.spawn(WORKERS)
    handlers: list[str] = []
    prefix: tuple[str, list] | None = None
    for _ in range(ROUNDS):
        for _ in range(2):
            handlers.append(crowd.request(rng, lambda w: w.start_run()))
        if prefix is None:  # a client reads the first run's stream as it happens
            reader = crowd.request(rng, lambda w: w)
            prefix = (handlers[0], sse(reader, handlers[0], stop=3))
        fault(rng.choice(["kill", "stop", "lock", "restart"]), crowd, cluster, rng)
        time.sleep(rng.uniform(0.0, 0.5))
    done = [crowd.request(rng, lambda w, h=h: w.wait_done(h, timeout=90)) for h in handlers]
    failures = [(h["handler_id"], h["status"], h.get("error")) for h in done]
    assert all(answer_of(h) == ANSWER for h in done), (SEED, failures)

    keys = (tmp_path / "keys.log").read_text().splitlines()
    called = [line.split(" ")[0] for line in keys]
    twice = {k for k in called if called.count(k) > 1}
    assert not twice, (SEED, twice, keys)

    reader = crowd.any(rng)
    for handler in handlers:
        history = sse(reader, handler)
        assert [seq for seq, _ in history] == list(range(len(history))), (SEED, history)
        assert history[-1][1] == "StopEvent", (SEED, history)
    assert prefix is not None
    handler, seen = prefix
    history = sse(reader, handler)
    assert seen == history[: len(seen)], (SEED, seen, history)
    rest = sse(reader, handler, last=seen[-1][0])
    assert seen + rest == history, (SEED, rest, history)
    print(f"chaos seed {SEED}: {len(handlers)} runs, {len(keys)} tool calls")  # noqa: T201
