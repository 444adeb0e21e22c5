"""``llm-compiler serve``: options, loading a user's workflow, and a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from llm_compiler import ConfigurationError, LLMCompilerWorkflow
from llm_compiler.cli import load_workflows, main, parse
from llm_compiler.serving.server import is_loopback
from llm_compiler.tuning import MANY_RUNS_GC_YOUNG

ROOT = Path(__file__).parents[2]


def test_defaults_bind_loopback_on_8000_with_a_memory_store():
    args = parse(["serve"], environ={})
    assert (args.host, args.port, args.store, args.workflow) == ("127.0.0.1", 8000, "memory", None)
    assert is_loopback(args.host) and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_serve_freezes_the_start_up_heap_and_collects_young_objects_less_often(monkeypatch):
    """A full collection under load walks only what runs allocate, not the libraries;
    the young generation waits for MANY_RUNS_GC_YOUNG allocations (what
    ``tune_for_many_runs`` sets). Restored afterwards."""
    import asyncio
    import gc

    from llm_compiler import cli

    seen: list[tuple[int, tuple[int, int, int]]] = []

    async def fake_serve(args: object) -> None:
        seen.append((gc.get_freeze_count(), gc.get_threshold()))

    monkeypatch.setattr(cli, "_serve", fake_serve)
    before = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)  # the default; an earlier in-process serve may have raised it
    try:
        asyncio.run(cli.run_server(parse(["serve"], environ={})))
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
    assert seen and seen[0][0] > 10_000
    assert seen[0][1] == (MANY_RUNS_GC_YOUNG, 10, 10) and MANY_RUNS_GC_YOUNG > 700


def test_a_factory_is_served_as_compiler():
    workflows = load_workflows("tests.serving.cli_app:make")
    assert list(workflows) == ["compiler"]
    assert isinstance(workflows["compiler"], LLMCompilerWorkflow)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "module:attr"),
        ("no_such_module_xyz:make", "Cannot import"),
        ("tests.serving.cli_app:missing", "has no attribute"),
        ("tests.serving.cli_app:not_a_workflow", "not a workflow"),
    ],
)
def test_bad_workflow_specs_are_clear_errors(spec, message):
    with pytest.raises(ConfigurationError, match=message):
        load_workflows(spec)


def test_main_reports_errors_without_a_traceback(capsys):
    assert main(["serve", "--workflow", "nope"]) == 1
    assert "module:attr" in capsys.readouterr().err


@pytest.mark.timeout(90)
@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_command_serves_the_page_until_interrupted(store, tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0"]
    cmd += ["--workflow", "tests.serving.cli_app:make"]
    if store == "sqlite":
        cmd += ["--store", f"sqlite:///{tmp_path / 'runs.db'}"]
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stdout.readline()
        while line.startswith("Runs are kept in"):  # a durable store says where, first
            line = proc.stdout.readline()
        assert "Serving the live plan page at http://127.0.0.1:" in line, line
        url = line.split(" at ")[1].split()[0]
        page = httpx.get(url, timeout=10)
        assert page.status_code == 200 and "LLMCompiler" in page.text
        run = httpx.post(
            url + "workflows/compiler/run", json={"start_event": {"user_msg": "q?"}}, timeout=20
        )
        assert run.status_code == 200 and run.json()["status"] == "completed"
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C, after a run was served
        assert proc.wait(timeout=20) == 0
        proc.stdout.close()
    errors = proc.stderr.read()
    proc.stderr.close()
    assert "Traceback" not in errors and "Error" not in errors, errors


@pytest.mark.timeout(60)
def test_sigterm_stops_the_server_like_ctrl_c_with_its_cleanup(tmp_path):
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default
    # handler the process then died at once, before the embedded model server (or any
    # other cleanup) was stopped.
    mark = tmp_path / "mark"
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "CLEANUP_MARK": str(mark),
    }
    cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0"]
    cmd += ["--workflow", "tests.serving.cli_app:with_cleanup"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert "Serving the live plan page" in proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        proc.stdout.close()
    assert mark.read_text() == "cleaned up"


def test_a_missing_serve_extra_is_a_clear_install_hint(monkeypatch):
    import llm_compiler._extras as extras
    import llm_compiler.serving as serving

    monkeypatch.setattr(extras, "_find", lambda module: None)
    with pytest.raises(ConfigurationError, match=r"pip install 'llm-compiler\[serve\]'"):
        serving.build_app  # noqa: B018 (the attribute access is the import)
