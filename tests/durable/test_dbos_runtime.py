"""dbos_runtime: a misconfigured store is one clear error, not a traceback from DBOS."""

from __future__ import annotations

import pytest

pytest.importorskip("llama_agents.dbos")

from llm_compiler.durable import dbos_runtime  # noqa: E402
from llm_compiler.errors import ConfigurationError  # noqa: E402


def test_an_unknown_store_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="is not sqlite:///... or postgresql://"):
        dbos_runtime("mysql://localhost/db")


def test_a_name_dbos_rejects_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigurationError, match="DBOS could not be set up on .*Invalid app"):
        dbos_runtime(f"sqlite:///{tmp_path / 'x.sqlite'}", app_name="b")
