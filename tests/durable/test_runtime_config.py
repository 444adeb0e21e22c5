"""durable_runtime: one configuration and one SQLite lock with served runs; clear errors."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

pytest.importorskip("asyncpg")

from llm_compiler.durable import durable_runtime  # noqa: E402
from llm_compiler.errors import ConfigurationError  # noqa: E402


def test_an_unknown_store_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="Unknown store"):
        durable_runtime("mysql://localhost/db")
    with pytest.raises(ConfigurationError, match="is not sqlite:///... or postgresql://"):
        durable_runtime("memory")


def test_a_sqlite_file_held_by_another_process_is_refused(tmp_path):
    """The in-process runtime takes the same one-process-per-file lock as a server."""
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from llm_compiler.durable import durable_runtime; "
            f"r = durable_runtime({store!r}); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigurationError, match="Another process already uses"):
            durable_runtime(store)
        from llm_compiler.durable.store import open_durable

        with pytest.raises(ConfigurationError, match="Another process already uses"):
            import asyncio

            asyncio.run(open_durable(store))
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_served_and_in_process_runs_share_one_configuration(tmp_path):
    from llm_compiler.durable.local import LocalRuntime
    from llm_compiler.durable.store import ServedRuntime

    local = durable_runtime(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(local, LocalRuntime) and local.durable is not None

    from llm_compiler.durable.store import open_durable

    served = asyncio.run(open_durable(f"sqlite:///{tmp_path / 'b.db'}", idle_release=5))
    assert isinstance(served.runtime, ServedRuntime)
    assert type(local.durable.config) is type(served.config)
    assert (local.durable.config.worker, served.config.worker) == ("local", "local")
    assert served.config.idle_release == 5
    assert local.durable.config.outage_limit == served.config.outage_limit
    for durable in (local.durable, served):  # give the SQLite locks back
        asyncio.run(durable.liveness.stop())
