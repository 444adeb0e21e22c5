"""Log lines name their run and task: a tool's own log line inside a call, and the engine's
lines during a run, in text and in JSON."""

from __future__ import annotations

import io
import json
import logging
import sys

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
