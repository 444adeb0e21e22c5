"""Log lines name their run and task: a tool's own log line inside a call, and the engine's
lines during a run, in text and in JSON."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import sys

import httpx

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.logs import JsonFormatter, configure
from llm_compiler.testing import ScriptedLLM, by_role

tool_log = logging.getLogger("tests.ops.tools")


def charge(order: str) -> str:
    """Charge an order."""
    tool_log.warning("charging %s", order)
    return f"charged {order}"


async def test_a_tools_log_line_names_its_run_and_task():
    llm = ScriptedLLM(by_role('1. charge("A-1")\n2. join()<END_OF_PLAN>', "Action: Finish(ok)"))
    wf = LLMCompilerWorkflow(tools=[charge], llm=llm)
    handler = configure("info", "json")
    stream = io.StringIO()
    handler.setStream(stream)
    try:
        handler_run = wf.run(user_msg="charge A-1")
        await handler_run
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    charged = [x for x in lines if x["message"] == "charging A-1"]
    assert charged and charged[0]["task_id"] == 1 and charged[0]["logger"] == "tests.ops.tools"
    assert charged[0]["run_id"] == handler_run.run_id
    assert llm.calls[0].run_id == handler_run.run_id and llm.calls[0].role == "planner"


def test_text_lines_carry_the_ids_and_json_lines_the_traceback():
    handler = configure("debug", "text")
    stream = io.StringIO()
    handler.setStream(stream)
    try:
        logging.getLogger("x").info("plain", extra={"run_id": "r1", "task_id": 3})
    finally:
        logging.getLogger().removeHandler(handler)
    assert stream.getvalue().rstrip().endswith("INFO x run_id=r1 task_id=3: plain")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, "f", 1, "failed", None, sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "error" and "ValueError: boom" in line["exc"]


def test_json_mode_says_json_on_stdout_too(capsys):
    from llm_compiler.logs import say

    handler = configure("info", "json")
    try:
        say("Serving the live plan page at http://127.0.0.1:1/")
    finally:
        logging.getLogger().removeHandler(handler)
    (line,) = capsys.readouterr().out.splitlines()
    said = json.loads(line)
    assert said["message"] == "Serving the live plan page at http://127.0.0.1:1/"
    assert said["level"] == "info" and said["logger"] == "llm_compiler.console"


async def serve_with_access_log(served) -> tuple[str, asyncio.Task]:
    """`served` on 127.0.0.1 with ``access_log=True`` (stop it with tests' ``stop``)."""
    from llm_compiler.serving import serve
    from llm_compiler.serving.server import bound_socket

    ready = asyncio.get_running_loop().create_future()
    stop_event = asyncio.Event()
    sock = bound_socket("127.0.0.1", 0)
    on = {"sock": sock, "on_ready": ready.set_result, "stop": stop_event, "access_log": True}
    task = asyncio.create_task(serve(served, "127.0.0.1", 0, **on))
    task.stop_event = stop_event  # type: ignore[attr-defined]
    return (await asyncio.wait_for(ready, 20)).rstrip("/"), task


async def test_the_access_log_has_fields_and_a_duration():
    from llm_compiler.serving import build_app
    from tests.serving.conftest import Overlap, stop, workflow

    handler = configure("info", "json")
    stream = io.StringIO()
    handler.setStream(stream)
    try:
        url, task = await serve_with_access_log(build_app({"compiler": workflow(Overlap())}))
        try:
            async with httpx.AsyncClient(base_url=url, timeout=20) as c:
                assert (await c.get("/handlers/nosuch?x=1")).status_code == 404
        finally:
            await stop(task)
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    (access,) = [x for x in lines if x["logger"] == "llm_compiler.access"]
    assert access["method"] == "GET" and access["path"] == "/handlers/nosuch"
    assert access["status"] == 404 and access["handler_id"] == "nosuch"
    assert isinstance(access["duration_ms"], float) and access["duration_ms"] >= 0
