"""A misconfigured or unreachable store is a one-line error at start, not a traceback."""

from __future__ import annotations

import asyncio
import socket

import pytest

from llm_compiler.cli import main
from llm_compiler.durable.spec import parse_store, redact
from llm_compiler.errors import ConfigurationError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_postgres_is_one_line(capsys):
    store = f"postgresql://me:secret@127.0.0.1:{free_port()}/runs"
    assert main(["serve", "--store", store, "--workflow", "tests.durable.crash_app:make"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: Cannot reach the store postgresql://me:***@127.0.0.1:")
    assert len(err.strip().splitlines()) == 1 and "secret" not in err


@pytest.mark.parametrize(
    "spec,message",
    [
        ("mysql://x", "Unknown store"),
        ("postgresql:///runs", "names no host"),
        ("sqlite:///", "is a directory"),
    ],
)
def test_bad_store_specs_are_clear_errors(spec, message):
    with pytest.raises(ConfigurationError, match=message):
        parse_store(spec)


def test_redact_hides_only_the_password():
    assert redact("postgresql://u:p@h:5/d") == "postgresql://u:***@h:5/d"
    assert redact("postgresql://u@h/d") == "postgresql://u@h/d"


def test_a_missing_durable_extra_is_an_install_hint(monkeypatch):
    import llm_compiler._extras as extras
    import llm_compiler.durable as durable

    monkeypatch.setattr(extras, "_find", lambda module: None if module == "asyncpg" else 1)
    with pytest.raises(
        ConfigurationError, match=r"needs asyncpg: pip install 'llm-compiler\[durable\]'"
    ):
        durable.open_durable  # noqa: B018 (the attribute access is the import)


def test_one_sqlite_store_serves_one_process(tmp_path):
    from llm_compiler.durable.workers import FileLiveness

    first = FileLiveness(str(tmp_path / "runs.db.lock"))
    first.claim()
    with pytest.raises(ConfigurationError, match="Another process already uses"):
        FileLiveness(str(tmp_path / "runs.db.lock")).claim()
    asyncio.run(first.stop())


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_max_runs_must_be_a_positive_number(value, capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--max-runs", value])
    assert "--max-runs" in capsys.readouterr().err
