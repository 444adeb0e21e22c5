"""ToolPolicy pieces: declaring on each kind of tool, keys from arguments, retry rules,
policies from JSON, MCP annotations and server limits, and the outcome of a task that was
in flight at a crash, by side-effect class."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llm_compiler.engine.policy import RunPolicies, resume_in_flight
from llm_compiler.errors import ConfigurationError
from llm_compiler.plan import PlanTask
from llm_compiler.tools import to_tool
from llm_compiler.tools.mcp import MCPConnection
from llm_compiler.tools.mcp.tool import MCPTool
from llm_compiler.tools.policy import (
    RetryPolicy,
    ToolPolicy,
    declared,
    load_policies,
    policy,
    with_policy,
)
from llm_compiler.tools.schema import tools_from_schemas


def test_a_decorated_callable_keeps_its_policy_as_a_tool():
    @policy(side_effect="pure", max_concurrency=2)
    def lookup(q: str) -> str:
        """Look up."""
        return q

    tool = to_tool(lookup)
    found = declared(tool)
    assert found is not None and found.side_effect == "pure" and found.max_concurrency == 2
    rules = RunPolicies.build([tool], limit=4)
    assert rules.slots(PlanTask(id=1, tool="lookup"), {}) == (("*", 4), ("tool:lookup", 2))


def test_llama_index_and_schema_tools_carry_policies():
    def send(to: str) -> str:
        """Send."""
        return to

    tool = with_policy(to_tool(send), requires_approval=True)
    assert declared(tool) is not None and declared(tool).requires_approval  # type: ignore[union-attr]
    spec = {"name": "charge", "description": "Charge.", "parameters": {"type": "object"}}
    (charge,) = tools_from_schemas(
        [spec], handler=lambda n, a: None, policies={"charge": ToolPolicy(side_effect="idempotent")}
    )
    assert declared(charge).side_effect == "idempotent"  # type: ignore[union-attr]


def test_resource_keys_come_from_arguments_and_functions():
    p = ToolPolicy(
        resource_keys=("account:{account_id}", "ledger", "file:{path}"),
        key_fn=lambda args: [f"user:{args.get('user', '?')}"],
    )
    keys = p.keys({"account_id": 7, "user": "ann"})
    assert keys == ("account:7", "file:{path}", "ledger", "user:ann")  # a missing field: as written
    broken = ToolPolicy(key_fn=lambda args: 1 / 0)
    rules = RunPolicies(None, {"w": broken})
    assert rules.slots(PlanTask(id=1, tool="w"), {}) == (("key:w:unkeyed", 1),)


def test_shared_limits_take_the_smallest_declared_capacity():
    rules = RunPolicies(
        None,
        {"a": ToolPolicy(limits={"srv": 3}), "b": ToolPolicy(limits={"srv": 1})},
    )
    assert rules.slots(PlanTask(id=1, tool="a"), {}) == (("limit:srv", 1),)


def test_retry_rules():
    retry = RetryPolicy(attempts=4, backoff=1, factor=3, max_backoff=5, on=("OSError",))
    assert [retry.delay(n) for n in (1, 2, 3)] == [1, 3, 5]
    assert retry.retries(ConnectionError()) and not retry.retries(ValueError())
    assert ToolPolicy(retry=retry).attempts == 1  # at_most_once: never retried
    assert ToolPolicy(side_effect="pure", retry=retry).attempts == 4


def test_policies_load_from_json_and_bad_ones_are_named():
    found = load_policies({"pay": {"side_effect": "at_most_once", "requires_approval": True}})
    assert found["pay"].requires_approval
    with pytest.raises(ConfigurationError, match="'pay'"):
        load_policies({"pay": {"side_effect": "twice"}})
    with pytest.raises(ConfigurationError):
        load_policies({"pay": {"no_such_field": 1}})
    with pytest.raises(ConfigurationError):
        load_policies(["pay"])


def listed(name: str, **annotations: bool) -> SimpleNamespace:
    return SimpleNamespace(
        name=name,
        description="A tool.",
        input_schema={"type": "object", "properties": {}},
        output_schema=None,
        annotations=SimpleNamespace(**annotations) if annotations else None,
    )


def test_the_sdks_tool_annotations_state_the_side_effect_class():
    """The MCP SDK's own ``ToolAnnotations`` (snake-case attributes), as a server lists them."""
    from mcp.types import ToolAnnotations

    read = listed("get")
    read.annotations = ToolAnnotations(readOnlyHint=True)
    put = listed("put")
    put.annotations = ToolAnnotations(idempotent_hint=True, read_only_hint=False)
    plain = MCPConnection("python -m nothing")
    assert declared(MCPTool(plain, read)).side_effect == "pure"  # type: ignore[union-attr]
    assert declared(MCPTool(plain, put)).side_effect == "idempotent"  # type: ignore[union-attr]


def test_mcp_tools_take_policies_from_annotations_server_and_tool():
    plain = MCPConnection("python -m nothing")
    assert declared(MCPTool(plain, listed("get", readOnlyHint=True))).side_effect == "pure"  # type: ignore[union-attr]
    put = MCPTool(plain, listed("put", idempotentHint=True))
    assert declared(put).side_effect == "idempotent"  # type: ignore[union-attr]
    assert declared(MCPTool(plain, listed("rm"))).side_effect == "at_most_once"  # type: ignore[union-attr]
    server = MCPConnection(
        "python -m bank",
        policy=ToolPolicy(side_effect="idempotent"),
        tool_policies={"pay": ToolPolicy(requires_approval=True)},
        max_concurrency=2,
    )
    pay, read = MCPTool(server, listed("pay")), MCPTool(server, listed("read", readOnlyHint=True))
    assert declared(pay).requires_approval and declared(pay).limits == {"mcp:python -m bank": 2}  # type: ignore[union-attr]
    assert declared(read).side_effect == "idempotent"  # the server's policy wins over a hint  # type: ignore[union-attr]
    with pytest.raises(ConfigurationError):
        MCPConnection("python -m bank", max_concurrency=0)


@pytest.mark.parametrize(
    ("side_effect", "rerun"), [("pure", True), ("idempotent", True), ("at_most_once", False)]
)
def test_a_task_in_flight_at_a_crash_by_side_effect_class(side_effect, rerun):
    task = PlanTask(id=3, tool="pay", round=1)
    resume = resume_in_flight(task, "run-1", ToolPolicy(side_effect=side_effect))
    assert resume.rerun is rerun and resume.idempotency_key == "run-1:1:3"
    if rerun:
        assert resume.result is None
    else:
        result = resume.result
        assert result is not None and result.is_error and "unknown" in result.output
        assert (result.task_id, result.round, result.run_id) == (3, 1, "run-1")
        assert result.event_id == "run-1:1:3:unknown-after-crash"  # the same if asked again


def test_serve_reads_tool_policies_and_gives_them_to_each_compiler(tmp_path):
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.cli import apply_tool_policies, parser, read_tool_policies
    from llm_compiler.testing import ScriptedLLM

    path = tmp_path / "policies.json"
    path.write_text('{"pay": {"requires_approval": true, "retry": {"attempts": 2}}}')
    args = parser().parse_args(["serve", "--tool-policies", str(path)])
    found = read_tool_policies(args.tool_policies)
    assert found["pay"].requires_approval and found["pay"].retry.attempts == 2

    def pay(amount: int) -> str:
        """Pay."""
        return "paid"

    wf = LLMCompilerWorkflow(tools=[pay], llm=ScriptedLLM([]), tool_policies={"x": ToolPolicy()})
    apply_tool_policies({"compiler": wf}, found)
    assert set(wf.config.tool_policies or {}) == {"x", "pay"}
    path.write_text("{not json")
    with pytest.raises(ConfigurationError, match="Cannot read tool policies"):
        read_tool_policies(str(path))
    with pytest.raises(ConfigurationError, match="Cannot read"):
        read_tool_policies(str(tmp_path / "missing.json"))


def test_the_workflow_answers_for_a_task_in_flight_at_a_crash():
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.engine.state import CompilerState
    from llm_compiler.testing import ScriptedLLM

    @policy(side_effect="pure")
    def look(q: str) -> str:
        """Look."""
        return q

    def pay(amount: int) -> str:  # no policy: the default, at_most_once
        """Pay."""
        return "paid"

    wf = LLMCompilerWorkflow(tools=[look, pay], llm=ScriptedLLM([]))
    tasks = {1: PlanTask(id=1, tool="look"), 2: PlanTask(id=2, tool="pay")}
    state = CompilerState(run_id="r", tasks=tasks)  # as a resumed run has it: no tool set
    assert wf.after_crash(state, 1).rerun
    unknown = wf.after_crash(state, 2)
    assert not unknown.rerun and unknown.result is not None and unknown.result.is_error
