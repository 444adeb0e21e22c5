"""Each private upstream name in ``llm_compiler._upstream`` is where the project expects it.

A failure names the name, the package and version that moved it, and the accessor to fix.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import re
from pathlib import Path

import pytest
from workflows import Workflow, step
from workflows.events import StartEvent, StopEvent

from llm_compiler import _upstream

SRC = Path(_upstream.__file__).parent


def moved(name: str, package: str, accessor: str) -> str:
    version = importlib.metadata.version(package)
    return (
        f"{package} {version} no longer has {name}, which llm_compiler._upstream.{accessor} "
        "reaches: find where it went and update that function (and only it)."
    )


class Echo(Workflow):
    @step
    async def echo(self, ev: StartEvent) -> StopEvent:
        return StopEvent(result=ev.get("x"))


async def test_a_handler_has_its_result_future():
    handler = Echo().run(x=1)
    assert hasattr(handler, "_result_task"), moved(
        "WorkflowHandler._result_task", "llama-index-workflows", "result_task"
    )
    future = _upstream.result_task(handler)
    assert isinstance(future, asyncio.Future)
    assert await handler == 1 and future.done()
    assert isinstance(future.result(), StopEvent) and future.result().result == 1


def test_a_workflow_has_its_run_cap():
    workflow = Echo()
    assert "_num_concurrent_runs" in vars(workflow), moved(
        "Workflow._num_concurrent_runs", "llama-index-workflows", "set_concurrent_runs"
    )
    _upstream.set_concurrent_runs(workflow, 3)
    assert Echo(num_concurrent_runs=3)._num_concurrent_runs == workflow._num_concurrent_runs == 3


def test_a_workflow_server_has_its_service():
    from llama_agents.server import WorkflowServer

    server = WorkflowServer()
    assert hasattr(server, "_service"), moved(
        "WorkflowServer._service", "llama-agents-server", "workflow_service"
    )
    service = _upstream.workflow_service(server)
    for method in ("get_workflow", "start_workflow", "cancel_handler"):
        assert callable(getattr(service, method, None)), moved(
            f"WorkflowServer._service.{method}", "llama-agents-server", "workflow_service"
        )
    params = inspect.signature(service.start_workflow).parameters
    assert {"workflow", "handler_id", "start_event"} <= set(params)


def test_the_stores_private_modules():
    from llama_agents.server import AbstractWorkflowStore

    try:
        postgres = _upstream.postgres_store("postgresql://nobody@127.0.0.1:9/none")
        stored = _upstream.stored_event_class()
    except ImportError as e:
        pytest.fail(f"{moved(str(e.name), 'llama-agents-server', 'postgres_store')} ({e})")
    assert isinstance(postgres, AbstractWorkflowStore)  # built without connecting
    assert "event" in stored.model_fields and "sequence" in stored.model_fields


def test_the_store_types_the_durable_store_builds_on():
    import inspect as _inspect

    for name in sorted(_upstream._STORE_NAMES):
        try:
            value = getattr(_upstream, name)
        except (ImportError, AttributeError) as e:
            pytest.fail(f"{moved(name, 'llama-agents-server', name)} ({e})")
        assert value is not None
    assert "sequence" in _upstream.StoredEvent.model_fields
    assert {"run_id", "tick_data"} <= set(_upstream.StoredTick.model_fields)
    assert len(_inspect.signature(_upstream.decode_persistent_handler).parameters) >= 1


def test_the_mcp_http_client_factory():
    pytest.importorskip("mcp", reason="the mcp extra is not installed")
    try:
        factory = _upstream.mcp_http_client()
    except ImportError as e:
        pytest.fail(f"{moved('mcp.shared._httpx_utils', 'mcp', 'mcp_http_client')} ({e})")
    assert "headers" in inspect.signature(factory).parameters


#: Files still reaching an upstream private name directly; each moves to ``_upstream``
#: with the rewrite of its package (durable/ and tools/mcp are being restructured).
PENDING: set[str] = set()
PRIVATE = re.compile(
    r"[.'\"]_(?:result_task|num_concurrent_runs|service|factory|workflow_store"
    r"|recover_pending_workflows)\b"
    r"|\b(?:llama_agents\.\w+|mcp\.shared|workflows)\._\w+"
)


def test_only_the_upstream_module_reaches_private_upstream_names():
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        if relative == "_upstream.py" or relative in PENDING:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line):
                offenders.append(f"{relative}:{number}: {line.strip()}")
    assert offenders == [], "reach these through llm_compiler._upstream:\n" + "\n".join(offenders)


def test_known_steps_are_the_workflows_own_and_follow_add_step():
    from workflows.decorators import step as step_decorator

    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    assert hasattr(Workflow, "_get_steps") and hasattr(Workflow, "_step_functions_version"), moved(
        "Workflow._get_steps / _step_functions_version", "llama-index-workflows", "KnownSteps"
    )

    class Probe(_upstream.KnownSteps, Echo):
        pass

    def tool(x: str) -> str:
        """Echo."""
        return x

    wf = LLMCompilerWorkflow(tools=[tool], llm=ScriptedLLM([]))
    assert wf._get_steps() == Workflow._get_steps(wf)  # the same steps, bound to wf
    assert wf._get_steps() == wf._get_steps() and wf._known_steps is not None
    probe = Probe()
    assert set(probe._get_steps()) == {"echo"}

    @step_decorator(workflow=Probe)
    async def extra(ev: StopEvent) -> None:
        return None

    assert set(probe._get_steps()) == {"echo", "extra"}  # add_step bumped the version
