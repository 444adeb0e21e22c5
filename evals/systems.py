"""The systems compared on BFCL: each turns one item into the calls it would dispatch.

A system is ``async def system(item, llm) -> Attempt | list[Call]``, registered by name
with :func:`register`. Add a new planner (a grammar-constrained one, a JSON dialect) with
one function; :func:`available` lists the registered ones.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.llms import LLM, ChatMessage, MessageRole

from evals.checker import Call
from evals.data import Item
from llm_compiler import CompiledPlan, LLMCompilerWorkflow, PlanTask
from llm_compiler.dialects import JsonPlanDialect
from llm_compiler.tools.schema import SchemaTool


@dataclass
class Attempt:
    """What a system made of one item."""

    calls: list[Call] = field(default_factory=list)
    """Calls that would be dispatched: (tool name, arguments by original name)."""
    malformed: bool = False
    """The output had lines that could not run, or no end (no ``join()``)."""
    unknown_tool_calls: int = 0
    """Calls to tools the item did not give."""
    text: str = ""
    """The model's raw output."""
    notes: list[str] = field(default_factory=list)


System = Callable[[Item, LLM], Awaitable["Attempt | list[Call]"]]
_REGISTRY: dict[str, System] = {}
# Systems that need something not in this tree say what, instead of failing the run.
_UNAVAILABLE: dict[str, str] = {}


def register(name: str) -> Callable[[System], System]:
    """Decorator: make a system available under `name`."""

    def add(fn: System) -> System:
        _REGISTRY[name] = fn
        _UNAVAILABLE.pop(name, None)
        return fn

    return add


def mark_unavailable(name: str, reason: str) -> None:
    """Record that system `name` cannot run here, and why (shown instead of results)."""
    if name not in _REGISTRY:
        _UNAVAILABLE[name] = reason


def get(name: str) -> System:
    """The system registered as `name`.

    Raises:
        LookupError: With the reason if the system is known to be unavailable.
    """
    if name in _REGISTRY:
        return _REGISTRY[name]
    raise LookupError(_UNAVAILABLE.get(name, f"no system named {name!r}"))


def available() -> list[str]:
    """Names of the registered systems."""
    return list(_REGISTRY)


async def run_system(system: System, item: Item, llm: LLM) -> Attempt:
    """Run a system on an item; a bare list of calls becomes an :class:`Attempt`."""
    out = await system(item, llm)
    if isinstance(out, Attempt):
        return out
    names = {f["name"] for f in item.functions}
    calls = list(out)
    return Attempt(calls=calls, unknown_tool_calls=sum(c[0] not in names for c in calls))


# --------------------------------------------------------------------------- text plans


def recording_tools(item: Item, log: list[Call] | None = None) -> list[SchemaTool]:
    """The item's functions as tools that record their calls instead of doing anything."""

    def record(name: str, arguments: dict[str, Any]) -> str:
        if log is not None:
            log.append((name, arguments))
        return f"{name} done"

    return [SchemaTool.from_definition(f, handler=record) for f in item.functions]


async def compiled_plan(workflow: LLMCompilerWorkflow, question: str) -> CompiledPlan:
    """The first plan of a run, compiled and checked but not run (``mode="plan_only"``)."""
    return await workflow.compile_plan(question)


def plan_attempt(plan: CompiledPlan, tools: Sequence[SchemaTool]) -> Attempt:
    """The calls a compiled plan would dispatch, by original parameter names."""
    by_name = {t.metadata.get_name(): t for t in tools}
    attempt = Attempt(text=plan.text, notes=list(plan.errors))
    attempt.malformed = bool(plan.errors) or plan.join_id is None
    for task in plan.tasks:
        if task.is_join:
            continue
        tool = by_name.get(task.tool)
        if tool is None:
            attempt.unknown_tool_calls += 1
        if task.error is not None:
            attempt.malformed = True
            attempt.notes.append(f"{task.id}. {task.error}")
        # Every call the model wrote is judged, as BFCL does; a line the engine would
        # refuse (error set) keeps its keyword arguments and fails the check on its own.
        args = _arguments(task, tool) if tool and task.error is None else dict(task.kwargs)
        attempt.calls.append((task.tool, args))
    return attempt


def _arguments(task: PlanTask, tool: SchemaTool) -> dict[str, Any]:
    """The arguments the tool would receive (validated), else the plan's, renamed back."""
    try:
        return tool.original_arguments(task.kwargs)
    except ValueError:  # the call would fail; its arguments are still what was planned
        aliases = {n: f.alias or n for n, f in tool.fn_schema.model_fields.items()}
        return {aliases.get(k, k): v for k, v in task.kwargs.items()}


@register("text")
async def text_plans(item: Item, llm: LLM) -> Attempt:
    """LLMCompilerWorkflow text plans, unconstrained: the first plan's calls."""
    tools = recording_tools(item)
    workflow = LLMCompilerWorkflow(tools=tools, llm=llm, constrained=False)
    return plan_attempt(await compiled_plan(workflow, item.question), tools)


@register("text+grammar")
async def grammar_plans(item: Item, llm: LLM) -> Attempt:
    """Text plans under a GBNF grammar built from the item's tools (llama.cpp servers)."""
    tools = recording_tools(item)
    workflow = LLMCompilerWorkflow(tools=tools, llm=llm, constrained=True)
    return plan_attempt(await compiled_plan(workflow, item.question), tools)


@register("json")
async def json_plans(item: Item, llm: LLM) -> Attempt:
    """The JSON plan dialect (unconstrained: the embedded server takes no JSON schema
    on completion requests)."""
    tools = recording_tools(item)
    workflow = LLMCompilerWorkflow(
        tools=tools, llm=llm, dialect=JsonPlanDialect(), constrained=False
    )
    return plan_attempt(await compiled_plan(workflow, item.question), tools)


# --------------------------------------------------------------------------- baseline


BASELINE_INSTRUCTIONS = """\
You are given a question and a set of functions, described in JSON. Answer with the \
function calls that fulfil the request, and nothing else, as one Python list: \
[func_name1(param1=value1, param2=value2), func_name2(param=value)]. Use keyword \
arguments with literal values. Call a function several times if the question needs it.
"""

BASELINE_EXAMPLES = """\
Functions: [{"name": "weather.get", "description": "Current weather of a city.", \
"parameters": {"type": "dict", "properties": {"city": {"type": "string"}, "unit": \
{"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}]
Question: What is the weather in Paris and in Rome, in celsius?
Calls: [weather.get(city="Paris", unit="celsius"), weather.get(city="Rome", unit="celsius")]

Functions: [{"name": "math.add", "description": "Add two numbers.", "parameters": \
{"type": "dict", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, \
"required": ["a", "b"]}}]
Question: What is 2 plus 3, and 10 plus 20?
Calls: [math.add(a=2, b=3), math.add(a=10, b=20)]
"""

_BASELINE_STOP = ["\nQuestion:", "\nFunctions:", "\n\n"]


def baseline_prompt(item: Item) -> str:
    """The few-shot prompt: instructions, two examples, the item's functions and question."""
    functions = json.dumps(item.functions, ensure_ascii=False)
    return (
        f"{BASELINE_INSTRUCTIONS}\n{BASELINE_EXAMPLES}\n"
        f"Functions: {functions}\nQuestion: {item.question}\nCalls:"
    )


async def complete_text(llm: LLM, prompt: str, stop: Sequence[str] = ()) -> str:
    """One reply of `llm` (chat or completion model) to `prompt`, cut at `stop`."""
    kwargs = {"stop": list(stop)} if stop and _speaks_openai(llm) else {}
    if llm.metadata.is_chat_model:
        message = ChatMessage(role=MessageRole.USER, content=prompt)
        text = (await llm.achat([message], **kwargs)).message.content or ""
    else:
        text = (await llm.acomplete(prompt, formatted=True, **kwargs)).text
    cut = [text.find(s) for s in stop if s in text]
    return text[: min(cut)] if cut else text


def _speaks_openai(llm: LLM) -> bool:
    try:
        from llama_index.llms.openai import OpenAI
    except ImportError:
        return False
    return isinstance(llm, OpenAI)


def parse_calls(text: str, functions: Sequence[dict[str, Any]]) -> list[Call]:
    """Calls in ``[f(a=1), g.h(b="x")]`` form (brackets optional), parsed with ast.

    Positional arguments are bound to the function's parameters in declaration order.

    Raises:
        ValueError: The text is not a list of calls with literal arguments.
    """
    source = text.strip().removeprefix("```python").removeprefix("```").removesuffix("```")
    source = source.strip()
    if not source.startswith("["):
        source = f"[{source}]"
    try:
        tree = ast.parse(source, mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"not a list of calls: {e.msg}") from None
    elements = tree.elts if isinstance(tree, ast.List | ast.Tuple) else [tree]
    order = {f["name"]: list(f.get("parameters", {}).get("properties", {})) for f in functions}
    calls = []
    for node in elements:
        if not isinstance(node, ast.Call):
            raise ValueError(f"not a call: {ast.unparse(node)[:80]}")
        name = ast.unparse(node.func)
        try:
            args = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
            positional = [ast.literal_eval(a) for a in node.args]
        except ValueError:
            raise ValueError(f"non-literal argument in {ast.unparse(node)[:80]}") from None
        for pname, value in zip(order.get(name, []), positional, strict=False):
            args.setdefault(pname, value)
        calls.append((name, args))
    return calls


@register("baseline")
async def baseline(item: Item, llm: LLM) -> Attempt:
    """A plain BFCL-style few-shot prompt; the reply parsed as a list of calls."""
    prompt = baseline_prompt(item)
    # A completion model gets the opening bracket written for it, as a chat model's
    # reply format is fixed by the instructions alone.
    prefix = "" if llm.metadata.is_chat_model else " ["
    text = prefix + await complete_text(llm, prompt + prefix, _BASELINE_STOP)
    names = {f["name"] for f in item.functions}
    try:
        calls = parse_calls(text, item.functions)
    except ValueError as e:
        return Attempt(malformed=True, text=text, notes=[str(e)])
    unknown = sum(c[0] not in names for c in calls)
    return Attempt(
        calls=calls,
        malformed=not calls,
        unknown_tool_calls=unknown,
        text=text,
    )


# Planners being built elsewhere register themselves under these names when present.
