"""The run's events keep the workflows ``Event`` behaviour of extra fields, each instance
with its own, while building no default factory (cheap to construct)."""

from __future__ import annotations

from llm_compiler.events import CompilerStream, TaskReady, TaskResult


def test_extra_fields_are_per_instance():
    a = TaskResult(round=0, task_id=1, tool_name="t", note="mine")
    b = TaskResult(round=0, task_id=2, tool_name="t")
    assert a.note == "mine" and "note" not in b._data and a._data is not b._data
    b._data["x"] = 1
    assert "x" not in TaskResult(round=0, task_id=3, tool_name="t")._data
    stream = CompilerStream(delta="x", response="x", current_agent_name="a", tag=1)
    assert (
        stream.tag == 1
        and CompilerStream(delta="", response="", current_agent_name="a")._data == {}
    )


def test_no_default_factory_runs_per_event():
    for cls in (TaskReady, TaskResult, CompilerStream):
        assert cls.__private_attributes__["_data"].default_factory is None
