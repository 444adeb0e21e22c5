"""A throwaway Postgres per session, and ``llm-compiler serve`` processes configured from
the environment, their whole output kept in files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx
import pytest

from llm_compiler.durable.cluster import Cluster
from tests.durable.conftest import cluster  # noqa: F401 - the session's Postgres

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "ops-token-" + "x7" * 12
PASSWORD = "pw-" + "q9" * 10


def scripted(postgres: Cluster, tool_seconds: float = 0) -> dict[str, str]:
    """The environment of a worker serving the scripted example on a fresh database."""
    return {
        "LLM_COMPILER_STORE": postgres.new_database(),
        "LLM_COMPILER_WORKFLOW": "examples.served_scripted:make",
        "SCRIPTED_TOOL_SECONDS": str(tool_seconds),
    }


def with_password(url: str) -> str:
    """`url` with a password (the test cluster trusts loopback, so any password works)."""
    return url.replace("postgres@", f"postgres:{PASSWORD}@", 1)


class Served:
    """One ``llm-compiler serve`` process; stdout and stderr go to files."""

    def __init__(self, folder: Path, env: Mapping[str, str], *args: str) -> None:
        self.out, self.err = folder / f"out{id(self)}", folder / f"err{id(self)}"
        full = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", **env}
        cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0", *args]
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=full, stdout=out, stderr=err)
        self.url = self._wait_for_url()
        self.client = httpx.Client(base_url=self.url, timeout=30)

    def _wait_for_url(self, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.out.read_text().splitlines():
                if "Serving the live plan page at " in line:
                    return line.split(" at ")[1].split()[0].rstrip("/")
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"the server did not start: {self.output()}")

    def output(self) -> str:
        """Everything it printed and logged so far."""
        return self.out.read_text() + self.err.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self.client.close()
        return code


@pytest.fixture
def served(tmp_path: Path) -> Iterator[list[Served]]:
    """Servers a test starts (append them); killed at the end if still running."""
    started: list[Served] = []
    yield started
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait(10)
        s.client.close()
