"""Traces leave the process over OTLP/HTTP: ``llm-compiler serve --otlp-endpoint`` and the
standard environment variables, received by a real OTLP/HTTP endpoint on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from llm_compiler import ConfigurationError, LLMCompilerWorkflow
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tracing.otel import export_configured, start_export, traces_url

from .otlp_receiver import OTLPReceiver

ROOT = Path(__file__).parents[2]


def test_endpoint_urls_and_configuration(monkeypatch):
    assert traces_url("http://h:4318") == "http://h:4318/v1/traces"
    assert traces_url("http://h:4318/v1/traces/") == "http://h:4318/v1/traces"
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    assert not export_configured() and start_export() is None
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    assert export_configured()
    with pytest.raises(ConfigurationError, match="not an http"):
        start_export("127.0.0.1:4318")


async def test_the_environment_variables_export_a_run(monkeypatch):
    with OTLPReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "traced-test")
        stop = start_export()
        assert stop is not None
        try:
            llm = ScriptedLLM(['1. f("x")\n2. join()<END_OF_PLAN>', "Action: Finish(ok)"])

            def f(x: str) -> str:
                return x * 2

            await LLMCompilerWorkflow(tools=[f], llm=llm).run(user_msg="q")
        finally:
            stop()  # flushes
        spans = receiver.wait_for("invoke_agent llm_compiler")
    names = {s["name"] for s in spans}
    assert {"invoke_agent llm_compiler", "llm_compiler.round", "execute_tool f"} <= names
    assert {"llm_compiler.planner", "llm_compiler.joiner"} <= names
    assert len({s["trace_id"] for s in spans}) == 1
    assert receiver.resources[0]["service.name"] == "traced-test"
    (task,) = [s for s in spans if s["name"] == "execute_tool f"]
    assert task["attributes"]["gen_ai.tool.call.result"] == "xx"


@pytest.mark.timeout(90)
def test_serve_exports_to_the_otlp_endpoint_flag():
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    with OTLPReceiver() as receiver:
        cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0"]
        cmd += ["--workflow", "tests.serving.cli_app:make", "--otlp-endpoint", receiver.url]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert "Serving the live plan page at" in line, line
            url = line.split(" at ")[1].split()[0]
            run = httpx.post(
                url + "workflows/compiler/run", json={"start_event": {"user_msg": "q?"}}, timeout=30
            )
            assert run.status_code == 200 and run.json()["status"] == "completed"
            summary = run.json()["result"]["value"]["result"]["summary"]  # tokens over HTTP
            assert summary["usage"]["prompt_tokens"] > 0 and summary["usage"]["cost"] is None
            assert summary["llm_calls"][0]["phase"] == "planner"
        finally:
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
            proc.stdout.close()
        spans = receiver.wait_for("invoke_agent llm_compiler")
    runs = [s for s in spans if s["name"] == "invoke_agent llm_compiler"]
    assert len(runs) == 1
    tasks = [s for s in spans if s["name"].startswith("execute_tool")]
    rounds = {s["span_id"] for s in spans if s["name"] == "llm_compiler.round"}
    assert tasks and all(t["parent_id"] in rounds for t in tasks)
    assert runs[0]["attributes"]["gen_ai.usage.input_tokens"] > 0
