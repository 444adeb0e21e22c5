"""A throwaway PostgreSQL cluster for tests and benchmarks (Debian's ``postgresql`` binaries).

``initdb`` into a temporary folder, ``postgres`` on 127.0.0.1 at a free port (no service,
no Unix socket outside that folder), removed at the end. As root, the server runs as the
``postgres`` user (``initdb`` refuses root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count

from llm_compiler.errors import ConfigurationError


def find_bin() -> str | None:
    """The newest ``/usr/lib/postgresql/<ver>/bin`` holding ``initdb`` (None: not installed)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0,
    )
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    return os.path.dirname(initdb) if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running throwaway cluster."""

    port: int
    _names: Iterator[int]
    _bin: str
    _user: list[str]
    _data: str = ""
    _options: str = ""

    @property
    def pid(self) -> int:
        """The postmaster's process id (its children are the database's processes)."""
        with open(os.path.join(self._data, "postmaster.pid")) as f:
            return int(f.readline())

    def url(self, database: str = "postgres") -> str:
        """The URL of `database` (user ``postgres``, trust auth on loopback)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """Create an empty database; its URL."""
        name = f"db{next(self._names)}"
        self._psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def restart(self) -> None:
        """``pg_ctl restart -m fast`` (same port and options)."""
        self._ctl("-m", "fast", "-w", "-l", self._log, "restart")

    def stop(self) -> None:
        """``pg_ctl stop -m fast``: the database is down until :meth:`start`."""
        self._ctl("-m", "fast", "-w", "stop")

    def start(self) -> None:
        """Start the stopped cluster again (same port and options)."""
        self._ctl("-o", self._options, "-w", "-l", self._log, "start")

    @property
    def _log(self) -> str:
        return f"{os.path.dirname(self._data)}/log"

    def _ctl(self, *args: str) -> None:
        _run([*self._user, f"{self._bin}/pg_ctl", "-D", self._data, *args])

    def _psql(self, sql: str) -> None:
        cmd = [f"{self._bin}/psql", "-q", "-h", "127.0.0.1", "-p", str(self.port)]
        subprocess.run([*cmd, "-U", "postgres", "-c", sql], check=True, capture_output=True)


@contextmanager
def throwaway_postgres(fsync: bool = False) -> Iterator[Cluster]:
    """Start a cluster (`fsync`: flush commits to disk, as a production database does;
    off by default, which is faster and enough for tests); stop and delete it on exit.

    Raises:
        ConfigurationError: PostgreSQL is not installed (``apt-get install postgresql``).
    """
    bindir = find_bin()
    if bindir is None:
        raise ConfigurationError("PostgreSQL is not installed: apt-get install postgresql")
    user: list[str] = []
    root = tempfile.mkdtemp(prefix="llmc-pg-")
    if os.geteuid() == 0:
        pg = pwd.getpwnam("postgres")
        os.chown(root, pg.pw_uid, pg.pw_gid)
        user = ["runuser", "-u", "postgres", "--"]
    data, port = os.path.join(root, "data"), _free_port()
    options = (
        f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync={'on' if fsync else 'off'}"
    )
    options += " -c max_connections=300"
    try:
        _run([*user, f"{bindir}/initdb", "-D", data, "-U", "postgres", "-A", "trust"])
        pg_ctl = [*user, f"{bindir}/pg_ctl", "-D", data]
        _run([*pg_ctl, "-o", options, "-w", "-l", f"{root}/log", "start"])
        try:
            yield Cluster(port, count(1), bindir, user, data, options)
        finally:
            subprocess.run([*pg_ctl, "-m", "immediate", "stop"], capture_output=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        program = next(os.path.basename(c) for c in cmd if c.startswith("/"))
        raise ConfigurationError(f"{program} failed: {done.stderr.strip()}")
