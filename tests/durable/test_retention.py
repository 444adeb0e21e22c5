"""Retention under a soak: real workers serving runs without pause with ``--retain`` keep
their tables bounded. At every moment, no run that finished longer ago than its age and
one prune interval (and a loaded machine's slack) is left, no row outlives its run; a
worker stopped with SIGTERM has left the workers' table when it exits, and a killed
worker's row goes once a peer holds its lock; once the clients stop, the tables empty."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import httpx
import pytest

from llm_compiler.durable.workers import REWATCH_GRACE

from .conftest import Calls, Worker

pytestmark = pytest.mark.timeout(300)

RETAIN = 2.0  # --retain 2s: pruned at start, then every RETAIN / 4
SOAK = 10.0
SLACK = 4.0
RUNS = 30  # runs ended before the soak stops: a soak, not a handful
DRAIN_GRACE = 2.0  # the stopped worker's --drain-grace
EXIT_BOUND = 60.0  # seconds past its drain for a stopped worker's exit (a loaded machine's)
RUN_TABLES = ("llmc_facts", "llmc_events", "llmc_inbox")


def snapshot(database: str, cutoff: float) -> dict[str, Any]:
    """Row counts of the store's tables; finished runs older than `cutoff` (epoch seconds);
    rows of runs that have no run row."""
    import psycopg

    with psycopg.connect(database) as db:
        out = {
            table: int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # type: ignore[index]
            for table in ("llmc_runs", *RUN_TABLES, "llmc_workers")
        }
        old = "SELECT count(*) FROM llmc_runs WHERE status <> 'running' AND completed_at < %s"
        out["old"] = int(db.execute(old, (cutoff,)).fetchone()[0])  # type: ignore[index]
        listed = db.execute("SELECT worker FROM llmc_workers ORDER BY worker").fetchall()
        out["listed"] = ",".join(str(w) for (w,) in listed)
        out["orphans"] = sum(
            int(
                db.execute(  # type: ignore[index]
                    f"SELECT count(*) FROM {table} t"
                    " WHERE NOT EXISTS (SELECT 1 FROM llmc_runs r WHERE r.run_id = t.run_id)"
                ).fetchone()[0]
            )
            for table in RUN_TABLES
        )
    return out


def client_loop(url: str, stop: threading.Event, done: list[float], errors: list[str]) -> None:
    """Start a run, wait for its end, again, until `stop`."""
    with httpx.Client(base_url=url, timeout=30) as client:
        while not stop.is_set():
            body = {"start_event": {"user_msg": "alpha, beta and gamma?"}}
            r = client.post("/workflows/compiler/run-nowait", json=body)
            if r.status_code != 200:
                errors.append(r.text)
                return
            handler = r.json()["handler_id"]
            while client.get(f"/handlers/{handler}").json()["status"] == "running":
                time.sleep(0.05)
            done.append(time.time())


def churn(database: str, calls: Calls, workers: list[Worker], seen: dict[str, Any]) -> None:
    """Two workers join (started together); one is stopped with SIGTERM, then the other
    killed; what the table lists once the first has exited goes in `seen`."""
    retain = ("--retain", f"{RETAIN:g}s")
    stopped = Worker(database, calls, *retain, "--drain-grace", f"{DRAIN_GRACE:g}", wait=False)
    killed = Worker(database, calls, *retain, wait=False)
    workers += [stopped, killed]
    stopped.ready()
    killed.ready()
    seen["stopped"], seen["killed"] = stopped.worker, killed.worker
    stopped.proc.send_signal(signal.SIGTERM)
    # Its drain ends within the grace; its exit follows the handover (bounded generously).
    seen["stop status"] = stopped.proc.wait(DRAIN_GRACE + EXIT_BOUND)
    seen["listed once stopped"] = snapshot(database, 0)["listed"]
    stopped.stop()  # its pipes
    killed.kill()
    seen["done"] = True


def test_tables_stay_bounded_under_a_soak(database, calls: Calls, workers: list[Worker]):
    retain = ("--retain", f"{RETAIN:g}s")
    a, b = Worker(database, calls, *retain), Worker(database, calls, *retain)
    workers += [a, b]
    stop, done, errors = threading.Event(), [], []
    threads = [
        threading.Thread(target=client_loop, args=(w.url, stop, done, errors)) for w in (a, b, a)
    ]
    for t in threads:
        t.start()
    seen: dict[str, Any] = {}
    churner = threading.Thread(target=churn, args=(database, calls, workers, seen))
    churner.start()
    samples: list[dict[str, Any]] = []
    start = time.monotonic()
    try:
        # The soak lasts SOAK seconds and until the churn happened and enough runs ended:
        # on a loaded machine, starting a worker alone may take longer than SOAK.
        while time.monotonic() - start < SOAK or churner.is_alive() or len(done) < RUNS:
            assert not errors, errors[:3]
            samples.append(snapshot(database, time.time() - RETAIN - RETAIN / 4 - SLACK))
            time.sleep(0.5)
    finally:
        stop.set()
        for t in (*threads, churner):
            t.join(60)
    assert not errors, errors[:3]
    # A worker stopped with SIGTERM leaves the table itself, before it exits.
    assert seen.get("stop status") == 0 and seen.get("done"), seen  # the churn happened
    assert seen["stopped"] not in seen["listed once stopped"].split(","), seen
    for sample in samples:
        assert sample["old"] == 0 and sample["orphans"] == 0, sample
    assert max(s["llmc_runs"] for s in samples) < len(done), samples

    # The clients stopped: every finished run goes within its age and a prune interval;
    # the killed worker's row goes once a peer holds its lock: at once, or after a
    # watcher's reconnect grace.
    live = ",".join(sorted((a.worker, b.worker)))
    deadline = time.monotonic() + RETAIN + RETAIN / 4 + SLACK + REWATCH_GRACE + 10
    while True:
        last = snapshot(database, time.time())
        if last["llmc_runs"] == 0 and last["listed"] == live or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert {k: last[k] for k in ("llmc_runs", *RUN_TABLES, "orphans")} == dict.fromkeys(
        ("llmc_runs", *RUN_TABLES, "orphans"), 0
    ), (last, len(done))
    assert last["listed"] == live, (last, seen)
