"""Paths of the test MCP servers, and a helper to run one over HTTP."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SERVERS = Path(__file__).parent / "servers"
PEAKS = [sys.executable, str(SERVERS / "peaks.py")]
GARBAGE = [sys.executable, str(SERVERS / "garbage.py")]


class HttpServer:
    """A server script run with ``--http``: its URL, and the process to kill."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [*argv, "--http"], stdout=subprocess.PIPE, text=True, env=env
        )
        assert self.process.stdout is not None
        self.url = self.process.stdout.readline().strip()  # printed once it listens
        if not self.url.startswith("http://127.0.0.1:"):
            self.stop()
            raise RuntimeError(f"the HTTP MCP server did not start: {self.url!r}")

    def stop(self) -> None:
        self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()
