"""Keeping a store: schema versions, pruning finished runs, what a commit of an
at-most-once start costs on SQLite, and what a host process is spared."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llm_compiler.cli import main
from llm_compiler.durable.config import DurableConfig
from llm_compiler.durable.facts import Row
from llm_compiler.durable.journal import Journal, RunRecord

pytestmark = pytest.mark.timeout(60)


def test_store_migrate_and_prune_from_the_command_line(tmp_path: Path, capsys) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["store", "migrate", "--store", store]) == 0
    assert "Schema version 3 (was none)" in capsys.readouterr().out
    assert main(["store", "migrate", "--store", store]) == 0
    assert "Schema version 3 (was 3)" in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "runs.db") as db:
        now = time.time()
        for run, status, done in (("old", "completed", now - 90), ("new", "failed", now)):
            db.execute(
                "INSERT INTO llmc_runs (run_id, handler_id, workflow, status, completed_at)"
                " VALUES (?, ?, 'compiler', ?, ?)",
                (run, run, status, done),
            )
            db.execute("INSERT INTO llmc_facts VALUES (?, 'head', '', '{}')", (run,))
            db.execute("INSERT INTO llmc_inbox (run_id, body) VALUES (?, '{}')", (run,))
        db.execute(
            "INSERT INTO llmc_runs (run_id, handler_id, workflow, status, started_at)"
            " VALUES ('live', 'live', 'compiler', 'running', ?)",
            (now - 90,),
        )
        db.execute("INSERT INTO llmc_inbox (run_id, body) VALUES ('live', '{}')")
    assert main(["store", "prune", "--store", store, "--older-than", "1m"]) == 0
    assert "Deleted 1 finished run(s)." in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "runs.db") as db:
        runs = {r for (r,) in db.execute("SELECT run_id FROM llmc_runs")}
        facts = {r for (r,) in db.execute("SELECT run_id FROM llmc_facts")}
        inbox = {r for (r,) in db.execute("SELECT run_id FROM llmc_inbox")}
    assert runs == {"new", "live"} and facts == {"new"}
    assert inbox == {"live"}  # a finished run's inbox goes at once; a running run's stays
    with pytest.raises(SystemExit):
        main(["store", "prune", "--store", store, "--older-than", "soon"])


def test_the_store_commands_read_the_environment_and_the_config_file(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    """No password on argv: the store comes from LLM_COMPILER_STORE or the --config file."""
    monkeypatch.setenv("LLM_COMPILER_STORE", f"sqlite:///{tmp_path / 'env.db'}")
    assert main(["store", "migrate"]) == 0
    assert "Schema version 3 (was none)" in capsys.readouterr().out
    assert main(["store", "prune", "--older-than", "1d"]) == 0
    assert "Deleted 0 finished run(s)." in capsys.readouterr().out
    monkeypatch.delenv("LLM_COMPILER_STORE")
    config = tmp_path / "llmc.toml"
    config.write_text(f'store = "sqlite:///{tmp_path / "file.db"}"\n[serve]\nmax-runs = 8\n')
    monkeypatch.setenv("LLM_COMPILER_CONFIG", str(config))
    assert main(["store", "migrate"]) == 0
    assert "Schema version 3 (was none)" in capsys.readouterr().out
    assert (tmp_path / "env.db").exists() and (tmp_path / "file.db").exists()


def test_a_store_that_is_not_a_database_is_a_one_line_error(tmp_path: Path, capsys) -> None:
    (tmp_path / "junk.db").write_bytes(b"not a database, " * 256)
    assert main(["store", "migrate", "--store", f"sqlite:///{tmp_path / 'junk.db'}"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "junk.db refused: file is not a database (the store is set by --store)" in err


def test_a_store_that_refuses_the_login_is_a_one_line_error(
    database: str, capsys, monkeypatch
) -> None:
    """A wrong login (here a role the cluster does not know) is one line naming the store,
    its password masked, and where it was set, not asyncpg's traceback."""
    wrong = database.replace("postgres@", "nobody:s3cret-pw@", 1)
    monkeypatch.setenv("LLM_COMPILER_STORE", wrong)
    for argv in (["store", "migrate"], ["store", "prune", "--older-than", "7d"]):
        assert main(argv) == 1
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1, err
        assert err.startswith("error: Cannot reach the store postgresql://nobody:***@"), err
        assert 'role "nobody" does not exist' in err and "s3cret-pw" not in err
        assert err.strip().endswith("(the store is set by $LLM_COMPILER_STORE)"), err
    import asyncio

    from llm_compiler.cli import _serve, parse
    from llm_compiler.errors import ConfigurationError

    serve = parse(["serve", "--store", wrong, "--workflow", "tests.serving.cli_app:make"])
    with pytest.raises(ConfigurationError, match=r"\(the store is set by --store\)$") as refused:
        asyncio.run(_serve(serve))  # refused before it serves
    assert "nobody:***@" in refused.value.message and "s3cret-pw" not in refused.value.message


def test_a_version_2_store_is_upgraded_in_place(tmp_path: Path, capsys) -> None:
    """A store of schema version 2 (its inbox rows are deleted when handed over) gains the
    inbox's ``taken`` column; its waiting events stay."""
    path = tmp_path / "runs.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE llmc_inbox (id INTEGER PRIMARY KEY, run_id TEXT, body TEXT)")
        db.execute("INSERT INTO llmc_inbox (run_id, body) VALUES ('r', '{}')")
        db.execute("CREATE TABLE llmc_schema (version INTEGER NOT NULL)")
        db.execute("INSERT INTO llmc_schema VALUES (2)")
    assert main(["store", "migrate", "--store", f"sqlite:///{path}"]) == 0
    assert "Schema version 3 (was 2)" in capsys.readouterr().out
    with sqlite3.connect(path) as db:
        assert list(db.execute("SELECT run_id, taken FROM llmc_inbox")) == [("r", None)]


async def test_an_at_most_once_start_is_committed_with_synchronous_full(tmp_path: Path) -> None:
    """SQLite runs ``synchronous=NORMAL`` (a commit may be lost by an OS crash), but a
    commit holding an at-most-once start mark is synced to disk before the call starts."""
    journal = Journal(DurableConfig.build(f"sqlite:///{tmp_path / 'j.db'}"))
    await journal.open()
    seen: list[str] = []
    db = journal.driver._db  # type: ignore[attr-defined]
    await journal.driver._call(lambda: db.set_trace_callback(seen.append))  # type: ignore[attr-defined]
    try:
        journal.hold("r", 1)
        journal.put_run(RunRecord("r", "r", "compiler", epoch=1))
        journal.put("r", Row("task", "1", "{}"))
        await journal.barrier("r")
        plain = list(seen)
        seen.clear()
        journal.put("r", Row("started", "0:1", "{}"))
        await journal.barrier("r")
    finally:
        await journal.close()
    assert not any("synchronous=FULL" in s for s in plain)
    full = next(i for i, s in enumerate(seen) if "synchronous=FULL" in s)
    assert full < seen.index("COMMIT"), seen


def test_a_library_host_is_not_ended_when_its_store_is_gone(tmp_path: Path) -> None:
    """The fatal handler of an in-process durable runtime logs and lets the runs fail; it
    never ends the host process (the served CLI's does, with status 75)."""
    code = (
        "from llm_compiler.durable import durable_runtime\n"
        f"rt = durable_runtime('sqlite:///{tmp_path / 'h.db'}')\n"
        "rt.journal.on_fatal('the store did not answer')\n"
        "print('alive')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "alive" in done.stdout, done.stderr


async def test_a_connection_that_does_not_keep_its_session_is_refused(database) -> None:
    """The check behind "direct connections or session pooling": a lock the session does
    not hold (as behind a pooler in transaction mode) stops the worker with a clear error."""
    import asyncpg

    from llm_compiler.durable.workers import _check_session
    from llm_compiler.errors import ConfigurationError

    conn = await asyncpg.connect(database)
    try:
        with pytest.raises(ConfigurationError, match="session pooling"):
            await _check_session(conn, "llm-compiler-worker:nobody")
        await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", "k")
        await _check_session(conn, "k")  # held by this session: fine
    finally:
        await conn.close()
