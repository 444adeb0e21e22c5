"""LangGraph's LLMCompiler tutorial, its scheduling core ported for ``benchmarks/engine_cpu.py``.

``.venv-langgraph/bin/python -m benchmarks.langgraph_compiler`` (``make bench-langgraph-venv``
makes that venv; this script imports neither llm_compiler nor llama-index) reads one JSON
request a line on stdin and answers each with one JSON line on stdout, so the caller can
take turns with its own runs::

    {"plan": "1. lookup(query=\\"...\\")\\n...", "answer": "...", "tag": 3, "latency": 0.0}
    -> {"cpu_s": ..., "wall_s": ..., "gc_s": ..., "tasks": 50, "answer": "..."}

The port follows the tutorial (langgraph ``docs/tutorials/llm-compiler``) part by part: the
planner is ``RunnableBranch(plan | replan prompt) | llm | LLMCompilerPlanParser`` streaming
``Task`` dicts as their lines complete; ``plan_and_schedule`` hands that stream to
``schedule_tasks``, which runs a task whose dependencies are done inline
(``schedule_task.invoke``) and gives one whose dependencies are not to a
``ThreadPoolExecutor`` thread that polls them with ``time.sleep(0.25)``; the joiner is
``select_recent_messages | prompt | llm.with_structured_output(JoinOutputs)``; a
``StateGraph`` of ``plan_and_schedule`` and ``join`` loops while the joiner replans. Only
the model and the prompts' wording differ: a scripted chat model streams the request's
``plan`` word by word (the same tokens the engine's scripted model streams) and answers the
joiner call with one ``JoinOutputs`` tool call carrying ``answer``; the tool is the
benchmark's ``lookup`` (a CRC of the query), synchronous like the tutorial's tools.

Two properties of the tutorial's scheduler matter when reading its numbers: a task is
parsed only after the tasks before it have *run* (the inline call blocks the plan's
stream), so tasks never overlap (a fan-out of 8 tools of 0.5 s takes 4 s), and a task
given to a thread waits in 0.25 s sleeps. Each reply's ``wall_s`` shows the first.
"""

from __future__ import annotations

import ast
import gc
import itertools
import json
import re
import sys
import time
import zlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Annotated, Any, TypedDict

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
)
from langchain_core.output_parsers.transform import BaseTransformOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableBranch, RunnableConfig, chain
from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

TOKEN = re.compile(r"\s*\S+|\s+")  # llm_compiler.testing.split_tokens
THOUGHT_PATTERN = r"Thought: ([^\n]*)"
ACTION_PATTERN = r"\n*(\d+)\. (\w+)\((.*)\)(\s*#\w+\n)?"
ID_PATTERN = r"\$\{?(\d+)\}?"
RETRY_AFTER = 0.25  # the tutorial's poll interval for a task waiting on its inputs


# ----------------------------------------------------------------------------- the model


class ScriptedChatModel(BaseChatModel):
    """Streams `reply` word by word, or answers a bound tool with `tool_args`, instantly."""

    reply: str = ""
    tool_args: dict[str, Any] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _message(self, kwargs: dict[str, Any]) -> AIMessage:
        tools = kwargs.get("tools")
        if not tools:
            return AIMessage(content=self.reply)
        name = tools[0]["function"]["name"]
        return AIMessage(content="", tool_calls=[{"name": name, "args": self.tool_args, "id": "1"}])

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._message(kwargs))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token in TOKEN.findall(self.reply):
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))


# ------------------------------------------------------------------------ output parser


class Task(TypedDict):
    idx: int
    tool: BaseTool | str
    args: Any
    dependencies: list[int]
    thought: str | None


def _ast_parse(arg: str) -> Any:
    try:
        return ast.literal_eval(arg)
    except (ValueError, SyntaxError):
        return arg


def _parse_action_args(args: str, tool: BaseTool | str) -> Any:
    """The tutorial's ``key=`` splitting of a call's arguments (keyword arguments only)."""
    if args == "" or isinstance(tool, str):
        return ()
    extracted: dict[str, Any] = {}
    tool_key, prev_idx = None, None
    for key in tool.args:
        if f"{key}=" in args:
            idx = args.index(f"{key}=")
            if prev_idx is not None and tool_key is not None:
                extracted[tool_key] = _ast_parse(args[prev_idx:idx].strip().rstrip(","))
            args = args.split(f"{key}=", 1)[1]
            tool_key, prev_idx = key, 0
    if prev_idx is not None and tool_key is not None:
        extracted[tool_key] = _ast_parse(args[prev_idx:].strip().rstrip(",").rstrip(")"))
    return extracted


def _dependencies(idx: int, tool_name: str, args: Any) -> list[int]:
    if tool_name == "join":
        return list(range(1, idx))
    numbers = {int(m) for m in re.findall(ID_PATTERN, str(args))}
    return [i for i in range(1, idx) if i in numbers]


def instantiate_task(
    tools: Sequence[BaseTool], idx: int, tool_name: str, args: str, thought: str | None
) -> Task:
    tool: BaseTool | str = "join"
    if tool_name != "join":
        tool = tools[[t.name for t in tools].index(tool_name)]
    parsed = _parse_action_args(args, tool)
    deps = _dependencies(idx, tool_name, parsed)
    return Task(idx=idx, tool=tool, args=parsed, dependencies=deps, thought=thought)


class LLMCompilerPlanParser(BaseTransformOutputParser[dict], extra="allow"):  # type: ignore[type-arg]
    """The tutorial's planning output parser: a task per completed line."""

    tools: list[BaseTool]

    def _transform(self, input: Iterator[str | BaseMessage]) -> Iterator[Task]:  # noqa: A002
        texts: list[str] = []
        thought = None
        for chunk in input:
            text = chunk if isinstance(chunk, str) else str(chunk.content)
            for task, last in self.ingest_token(text, texts, thought):
                thought = last
                yield task
        if texts:
            task, _ = self._parse_task("".join(texts), thought)
            if task:
                yield task

    def parse(self, text: str) -> Any:
        return list(self._transform(iter([text])))

    def ingest_token(
        self, token: str, buffer: list[str], thought: str | None
    ) -> Iterator[tuple[Task, str | None]]:
        buffer.append(token)
        if "\n" in token:
            lines = "".join(buffer).split("\n")
            for line in lines[:-1]:
                task, thought = self._parse_task(line, thought)
                if task:
                    yield task, thought
            buffer.clear()
            buffer.append(lines[-1])

    def _parse_task(self, line: str, thought: str | None = None) -> tuple[Task | None, str | None]:
        task = None
        if match := re.match(THOUGHT_PATTERN, line):
            thought = match.group(1)
        elif match := re.match(ACTION_PATTERN, line):
            idx, tool_name, args, _ = match.groups()
            task = instantiate_task(self.tools, int(idx), tool_name, args, thought)
            thought = None
        return task, thought


# ---------------------------------------------------------------------------- planner

PLANNER_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Given a user query, create a plan to solve it with the utmost parallelizability. "
            "Each plan should comprise an action from the following {num_tools} types:\n"
            "{tool_descriptions}\n{num_tools}. join(): Collects and combines results from "
            "prior actions.\n - Each action MUST have a unique ID, which is strictly "
            "increasing.\n - Inputs for actions can either be constants or outputs from "
            "preceding actions; use $id for the output of action id.\n - Always call join as "
            "the last action in the plan. Say '<END_OF_PLAN>' after you call join.\n{replan}",
        ),
        MessagesPlaceholder(variable_name="messages"),
        ("system", "Remember, ONLY respond with the task list in the correct format!"),
    ]
)


def create_planner(llm: BaseChatModel, tools: Sequence[BaseTool]) -> Any:
    descriptions = "\n".join(f"{i + 1}. {t.description}\n" for i, t in enumerate(tools))
    planner_prompt = PLANNER_PROMPT.partial(
        replan="", num_tools=str(len(tools) + 1), tool_descriptions=descriptions
    )
    replanner_prompt = PLANNER_PROMPT.partial(
        replan=" - You are given the previous plan with its observations; never repeat them.",
        num_tools=str(len(tools) + 1),
        tool_descriptions=descriptions,
    )

    def should_replan(state: list[BaseMessage]) -> bool:
        return isinstance(state[-1], SystemMessage)

    def wrap_messages(state: list[BaseMessage]) -> dict[str, Any]:
        return {"messages": state}

    def wrap_and_get_last_index(state: list[BaseMessage]) -> dict[str, Any]:
        next_task = 0
        for message in state[::-1]:
            if isinstance(message, FunctionMessage):
                next_task = message.additional_kwargs["idx"] + 1
                break
        state[-1].content = f"{state[-1].content} - Begin counting at : {next_task}"
        return {"messages": state}

    branch = RunnableBranch(
        (should_replan, wrap_and_get_last_index | replanner_prompt),
        wrap_messages | planner_prompt,
    )
    return branch | llm | LLMCompilerPlanParser(tools=list(tools))


# ------------------------------------------------------------------ task fetching unit


def _get_observations(messages: list[BaseMessage]) -> dict[int, Any]:
    results = {}
    for message in messages[::-1]:
        if isinstance(message, FunctionMessage):
            results[int(message.additional_kwargs["idx"])] = message.content
    return results


def _resolve_arg(arg: Any, observations: dict[int, Any]) -> Any:
    def replace_match(match: re.Match[str]) -> str:
        return str(observations.get(int(match.group(1)), match.group(0)))

    if isinstance(arg, str):
        return re.sub(ID_PATTERN, replace_match, arg)
    if isinstance(arg, list):
        return [_resolve_arg(a, observations) for a in arg]
    return str(arg)


def _execute_task(task: Task, observations: dict[int, Any], config: RunnableConfig) -> Any:
    tool = task["tool"]
    if isinstance(tool, str):
        return tool
    args = task["args"]
    try:
        if isinstance(args, dict):
            resolved = {key: _resolve_arg(val, observations) for key, val in args.items()}
        else:
            resolved = _resolve_arg(args, observations) if isinstance(args, str) else args
    except Exception as e:  # noqa: BLE001 - the tutorial's error observation
        return f"ERROR(Failed to call {tool.name} with args {args}.) {e!r}"
    try:
        return tool.invoke(resolved, config)
    except Exception as e:  # noqa: BLE001
        return f"ERROR(Failed to call {tool.name} with args {args}. {e!r})"


@chain
def schedule_task(task_inputs: dict[str, Any], config: RunnableConfig) -> None:
    task: Task = task_inputs["task"]
    observations: dict[int, Any] = task_inputs["observations"]
    observations[task["idx"]] = _execute_task(task, observations, config)


def schedule_pending_task(task: Task, observations: dict[int, Any], retry_after: float) -> None:
    while True:
        deps = task["dependencies"]
        if deps and any(dep not in observations for dep in deps):
            time.sleep(retry_after)  # the tutorial's poll
            continue
        schedule_task.invoke({"task": task, "observations": observations})
        break


@chain
def schedule_tasks(scheduler_input: dict[str, Any]) -> list[FunctionMessage]:
    """The tutorial's task fetching unit: run what is ready inline, poll the rest."""
    tasks = scheduler_input["tasks"]
    messages = scheduler_input["messages"]
    observations = _get_observations(messages)
    originals = set(observations)
    names: dict[int, str] = {}
    args_for_tasks: dict[int, Any] = {}
    futures = []
    with ThreadPoolExecutor() as executor:
        for task in tasks:
            deps = task["dependencies"]
            tool = task["tool"]
            names[task["idx"]] = tool if isinstance(tool, str) else tool.name
            args_for_tasks[task["idx"]] = task["args"]
            if deps and any(dep not in observations for dep in deps):
                futures.append(
                    executor.submit(schedule_pending_task, task, observations, RETRY_AFTER)
                )
            else:
                schedule_task.invoke({"task": task, "observations": observations})
        wait(futures)
    return [
        FunctionMessage(
            name=names[k],
            content=str(observations[k]),
            additional_kwargs={"idx": k, "args": args_for_tasks[k]},
            tool_call_id=k,
        )
        for k in sorted(observations.keys() - originals)
    ]


# ----------------------------------------------------------------------------- joiner


class FinalResponse(BaseModel):
    """The final response/answer."""

    response: str


class Replan(BaseModel):
    feedback: str = Field(description="What the previous attempts lacked.")


class JoinOutputs(BaseModel):
    """Decide whether to replan or whether you can return the final response."""

    thought: str = Field(description="The chain of thought reasoning for the selected action")
    action: FinalResponse | Replan


JOINER_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Solve the question from the results of the plan, or ask to replan."),
        MessagesPlaceholder(variable_name="messages"),
        ("system", "Using the above results, answer the question or replan."),
    ]
)


def _parse_joiner_output(decision: JoinOutputs) -> dict[str, list[BaseMessage]]:
    response: list[BaseMessage] = [AIMessage(content=f"Thought: {decision.thought}")]
    if isinstance(decision.action, Replan):
        feedback = f"Context from last attempt: {decision.action.feedback}"
        return {"messages": [*response, SystemMessage(content=feedback)]}
    return {"messages": [*response, AIMessage(content=decision.action.response)]}


def select_recent_messages(state: dict[str, Any]) -> dict[str, Any]:
    selected = []
    for msg in state["messages"][::-1]:
        selected.append(msg)
        if isinstance(msg, HumanMessage):
            break
    return {"messages": selected[::-1]}


# ------------------------------------------------------------------------------ graph


class State(TypedDict):
    messages: Annotated[list[BaseMessage], add_messages]


def lookup_value(query: str) -> int:
    """What ``lookup(query)`` returns (``benchmarks.tools.lookup_value``)."""
    return zlib.crc32(query.encode()) % 1000


def lookup_tool(latency: float) -> BaseTool:
    """The benchmark's ``lookup``, taking `latency` seconds (a blocking sleep, as a
    synchronous tool of the tutorial's would block)."""

    def lookup(query: str) -> int:
        """Look up a fact about the query; returns a number."""
        if latency:
            time.sleep(latency)
        return lookup_value(query)

    return StructuredTool.from_function(lookup, name="lookup")


def build(planner_llm: BaseChatModel, joiner_llm: BaseChatModel, latency: float) -> Any:
    tools = [lookup_tool(latency)]
    planner = create_planner(planner_llm, tools)
    structured = joiner_llm.with_structured_output(JoinOutputs, method="function_calling")
    joiner = select_recent_messages | JOINER_PROMPT | structured | _parse_joiner_output

    @chain
    def plan_and_schedule(state: dict[str, Any]) -> dict[str, Any]:
        messages = state["messages"]
        tasks = planner.stream(messages)
        try:
            tasks = itertools.chain([next(tasks)], tasks)
        except StopIteration:
            tasks = iter([])
        return {"messages": schedule_tasks.invoke({"messages": messages, "tasks": tasks})}

    def should_continue(state: dict[str, Any]) -> str:
        return END if isinstance(state["messages"][-1], AIMessage) else "plan_and_schedule"

    graph = StateGraph(State)
    graph.add_node("plan_and_schedule", plan_and_schedule)
    graph.add_node("join", joiner)
    graph.add_edge("plan_and_schedule", "join")
    graph.add_conditional_edges("join", should_continue)
    graph.add_edge(START, "plan_and_schedule")
    return graph.compile()


GRAPHS: dict[tuple[str, str, float], Any] = {}


def graph_for(plan: str, answer: str, latency: float) -> Any:
    """The graph whose scripted models reply `plan` and `answer` and whose tool takes
    `latency` seconds (built once for each)."""
    key = (plan, answer, latency)
    if key not in GRAPHS:
        planner_llm = ScriptedChatModel(reply=plan)
        action = {"response": answer}
        joiner_llm = ScriptedChatModel(tool_args={"thought": "All found.", "action": action})
        GRAPHS[key] = build(planner_llm, joiner_llm, latency)
    return GRAPHS[key]


def run_once(request: dict[str, Any]) -> dict[str, Any]:
    """One run of the request's plan; raises if a tool result or the answer is wrong."""
    graph = graph_for(request["plan"], request["answer"], request.get("latency", 0.0))
    question = HumanMessage(content=f"{request.get('question', '')} [run {request['tag']}]")
    collected = [0.0, 0.0]  # CPU seconds in garbage collections, the last one's start

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collected[1] = time.process_time()
        else:
            collected[0] += time.process_time() - collected[1]

    gc.callbacks.append(on_gc)
    try:
        c0, t0 = time.process_time(), time.perf_counter()
        out = graph.invoke({"messages": [question]}, {"recursion_limit": 100})
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    finally:
        gc.callbacks.remove(on_gc)
    results = [m for m in out["messages"] if isinstance(m, FunctionMessage) and m.name != "join"]
    for m in results:
        if m.content != str(lookup_value(m.additional_kwargs["args"]["query"])):
            raise AssertionError(f"task {m.additional_kwargs['idx']}: {m.content!r}")
    answer = out["messages"][-1].content
    if answer != request["answer"]:
        raise AssertionError(f"answer {answer!r}")
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "gc_s": collected[0],
        "tasks": len(results),
        "answer": answer,
    }


def main() -> int:
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(run_once(json.loads(line))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
