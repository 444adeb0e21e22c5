"""A throwaway PostgreSQL cluster per session, and `llm-compiler serve` workers as processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_compiler.durable.cluster import Cluster, find_bin, throwaway_postgres

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.durable.crash_app:make"


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if find_bin() is None:
        pytest.skip("PostgreSQL is not installed (make test installs Debian's postgresql)")
    with throwaway_postgres() as c:
        yield c


@pytest.fixture
def database(cluster: Cluster) -> str:
    """A fresh, empty database for one test."""
    return cluster.new_database()


class Calls:
    """The model and tool calls every worker made, read from the shared log file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()

    def lines(self) -> list[tuple[str, str, str]]:
        rows = [line.split(" ", 2) for line in self.path.read_text().splitlines()]
        return [(pid, kind, what) for pid, kind, what in rows]

    def count(self, kind: str, what: str) -> int:
        return sum(1 for _, k, w in self.lines() if (k, w) == (kind, what))

    def wait_for(self, kind: str, what: str, n: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.count(kind, what) < n:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {kind} {what} within {timeout}s: {self.lines()}")
            time.sleep(0.05)


@pytest.fixture
def calls(tmp_path: Path) -> Calls:
    return Calls(tmp_path / "calls.log")


#: The call each task of the crash app makes, as `Calls` logs it.
TASK_CALLS = {
    1: ("tool", "fetch:alpha"),
    2: ("tool", "fetch:beta"),
    3: ("tool", "slow:gamma"),
    4: ("tool", "combine"),
}


def _select(database: str, query: str, value: str) -> list[tuple[Any, ...]]:
    """The rows of `query` (one ``{mark}`` for `value`) on the store at `database`."""
    if database.startswith("sqlite:///"):
        import sqlite3

        with sqlite3.connect(database.removeprefix("sqlite:///")) as db:
            return db.execute(query.format(mark="?"), (value,)).fetchall()
    import psycopg

    with psycopg.connect(database) as db:
        return db.execute(query.format(mark="%s"), (value,)).fetchall()


def run_of(database: str, handler_id: str) -> str:
    """The run id of `handler_id`, read from the store (its worker may be stopped)."""
    rows = _select(database, "SELECT run_id FROM llmc_runs WHERE handler_id = {mark}", handler_id)
    assert rows, f"no run for handler {handler_id}"
    return str(rows[0][0])


def journaled(database: str, run_id: str) -> set[tuple[str, str]]:
    """The calls whose outcome is in the journal of `run_id` (read it right after a kill: a
    result can reach the event stream before its fact is committed, and only a committed
    fact is promised never to run again): the planner's once round 0's plan is recorded
    complete, a tool's once its task's result is, the joiner's once the answer is."""
    rows = _select(database, "SELECT kind, key, body FROM llmc_facts WHERE run_id = {mark}", run_id)
    out: set[tuple[str, str]] = set()
    for kind, key, body in rows:
        if kind == "round" and key == "0" and json.loads(body)["complete"]:
            out.add(("llm", "planner"))
        elif kind == "head" and json.loads(body)["answer"] is not None:
            out.add(("llm", "joiner"))
        elif kind == "result":
            out.add(TASK_CALLS[int(key.split(":")[1])])
    return out


class Worker:
    """One ``llm-compiler serve`` process."""

    def __init__(
        self,
        store: str,
        calls: Calls,
        *extra: str,
        crash_at: str = "",
        slow: float = 0,
        undeclared: str = "",
        wait: bool = True,
        env: dict[str, str] | None = None,
        log: Path | None = None,
    ) -> None:
        env = {
            **os.environ,
            **(env or {}),
            "LLMC_UNDECLARED": undeclared,
            "LLMC_SLOW_SECONDS": str(slow),
            "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
            "LLMC_CALLS": str(calls.path),
            "LLMC_CRASH_AT": crash_at,
        }
        cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0"]
        cmd += ["--workflow", APP, "--store", store, *extra]
        err = subprocess.PIPE if log is None else log.open("a")  # noqa: SIM115 - the child's
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True
        )
        if log is not None:
            err.close()  # type: ignore[union-attr]
        if wait:
            self.ready()

    def ready(self) -> None:
        """Wait until the worker serves (its URL printed)."""
        self.worker = ""
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if "(worker " in line:
                self.worker = line.split("(worker ")[1].rstrip(").\n")
            if "Serving the live plan page at " in line:
                self.url = line.split(" at ")[1].split()[0].rstrip("/")
                break
        else:
            err = self.proc.stderr.read() if self.proc.stderr else "(stderr went to its log)"
            raise AssertionError(f"the worker did not start: {err}")
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def run_id(self, handler_id: str) -> str:
        return str(self.client.get(f"/handlers/{handler_id}").json()["run_id"])

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close()

    def _close(self) -> None:
        self.client.close()
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    def start_run(self, **start: object) -> str:
        body = {"start_event": {"user_msg": "alpha, beta and gamma?", **start}}
        r = self.client.post("/workflows/compiler/run-nowait", json=body)
        assert r.status_code == 200, r.text
        return str(r.json()["handler_id"])

    def wait_done(self, handler_id: str, timeout: float = 60) -> dict:
        """The run's handler once it is no longer running (read through this worker)."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.client.get(f"/handlers/{handler_id}")
            # 503 (with Retry-After) while the database does not answer: ask again.
            handler = answer.json() if answer.status_code != 503 else {"status": "running"}
            if handler["status"] != "running":
                return handler
            if time.monotonic() > deadline:
                raise AssertionError(f"run {handler_id} still running after {timeout}s")
            time.sleep(0.1)

    def events(
        self,
        handler_id: str,
        stop_at: str | None = None,
        until: Callable[[list[dict]], bool] = None,
    ) -> list[dict]:
        """The run's stream from its start (NDJSON), to its end, the first `stop_at` or
        once `until(events so far)`."""
        out: list[dict] = []
        params = {"sse": "false", "after_sequence": -1}
        with self.client.stream("GET", f"/events/{handler_id}", params=params) as r:
            for line in r.iter_lines():
                if line.strip():
                    out.append(json.loads(line))
                    if out[-1]["type"] == stop_at or (until is not None and until(out)):
                        break
        return out


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Workers a test starts (append them); stopped at the end."""
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()
