"""JSON plans, for models with structured output (OpenAI ``response_format``, vLLM, llama.cpp).

The plan is one JSON object, streamed and parsed incrementally: each task is dispatched
as soon as its object in ``tasks`` is complete, while the model still writes the next::

    {"thought": "Both lengths are needed.",
     "tasks": [{"id": 1, "tool": "search", "args": {"query": "Golden Gate Bridge"}},
               {"id": 2, "tool": "search", "args": {"query": "Brooklyn Bridge"}},
               {"id": 3, "tool": "calculator", "args": {"expression": "$1 - $2"}}]}

``"$N"`` in a string value is the result of task N (a whole ``"$N"`` keeps its type).
The joiner is the shared Thought/Action joiner. With ``constrained`` decoding the
request carries a JSON schema built from the tools (``response_format``): on llama.cpp
servers and on servers with structured outputs (OpenAI's API, vLLM).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from llama_index.core.tools import BaseTool

from llm_compiler.dialects import prompting as prompting
from llm_compiler.dialects.arguments import PlanLineError, nesting_depth, parse_json_call
from llm_compiler.dialects.base import JoinerDecision, LLMRequest, PlannerContext
from llm_compiler.dialects.grammar import json_plan_schema
from llm_compiler.dialects.llmcompiler.prompts import render_actions
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.dialects.thought_action import JoinerInput, parse_joiner_output
from llm_compiler.plan import PlanError, PlanTask, iter_refs

JSON_INSTRUCTIONS = """\
Given a question, write a plan of tool calls that answers it with as many calls running \
in parallel as possible. The tools:
{actions}

Reply with one JSON object and nothing else:
{{"thought": "<short reasoning>", "tasks": [{{"id": 1, "tool": "<tool>", "args": {{...}}}}, ...]}}
- Ids start at {next_id} and increase by one.
- "args" holds the tool's arguments by name, with the declared types.
- A string "$N" is the result of task N (it must be an earlier task); "$N" may also \
appear inside a longer string.
- Calls that do not need each other's results must not reference each other.
"""

JSON_EXAMPLE = """\
Example (its tools may differ from yours):
Question: Which is older, the Eiffel Tower or the Statue of Liberty?
{"thought": "Look both up.", "tasks": [{"id": 1, "tool": "search", "args": {"query": \
"Eiffel Tower"}}, {"id": 2, "tool": "search", "args": {"query": "Statue of Liberty"}}]}
"""

SchemaBuilder = Callable[[Sequence[BaseTool]], dict[str, Any]]


class JsonPlanStream:
    """Incremental parser of a streamed JSON plan; linear in the text.

    A character scanner tracks strings, escapes and nesting; an object that opens
    directly inside the ``tasks`` array (or a top-level array) is cut out and parsed the
    moment its closing brace arrives.
    """

    def __init__(self, context: PlannerContext) -> None:
        self.round = context.round
        self.max_tasks = context.max_tasks
        self.max_arg_depth = context.max_arg_depth
        self.done = False
        self.thoughts: list[str] = []
        self.errors: list[str] = []
        self.join_id: int | None = None
        self._chunks: list[str] = []
        self._joined: str | None = ""
        self._stack: list[str] = []
        self._in_string = False
        self._escape = False
        self._task_parts: list[str] | None = None  # the open task object, piece by piece
        self._next = context.next_id
        self._earlier = set(context.known_ids)
        self._alias: dict[int, int] = {}
        self._count = 0

    @property
    def text(self) -> str:
        """Everything fed so far."""
        if self._joined is None:
            self._joined = "".join(self._chunks)
        return self._joined

    def feed(self, delta: str) -> list[PlanTask]:
        """Scan the new text; return the tasks whose objects it completed."""
        if self.done or not delta:
            return []
        self._chunks.append(delta)
        self._joined = None
        out: list[PlanTask] = []
        piece_start = 0  # where the open task's text starts within `delta`
        for i, ch in enumerate(delta):
            if self._in_string:
                if self._escape:
                    self._escape = False
                elif ch == "\\":
                    self._escape = True
                elif ch == '"':
                    self._in_string = False
            elif ch == '"':
                self._in_string = True
            elif ch in "{[":
                if ch == "{" and self._is_task_slot():
                    self._task_parts, piece_start = [], i
                self._stack.append(ch)
            elif ch in "}]" and self._stack:
                self._stack.pop()
                if ch == "}" and self._task_parts is not None and self._is_task_slot():
                    out += self._task("".join(self._task_parts) + delta[piece_start : i + 1])
                    self._task_parts = None
                if not self._stack:
                    self._end()
                    return out
        if self._task_parts is not None:
            self._task_parts.append(delta[piece_start:])
        return out

    def _is_task_slot(self) -> bool:
        """Whether an object opened now is a task: directly in the plan's task array."""
        s = self._stack
        return (s == ["{", "["]) or (s == ["["])

    def _task(self, body: str) -> list[PlanTask]:
        if self._count >= self.max_tasks:
            if self._count == self.max_tasks:
                message = f"The plan has more than {self.max_tasks} tasks."
                self.errors.append(PlanError(message, "too_many_tasks"))
                self._count += 1
            return []
        self._count += 1
        task_id = self._next
        self._next += 1
        if nesting_depth(body) > self.max_arg_depth:
            message = f"Task {task_id}'s arguments are nested more than {self.max_arg_depth} deep."
            return [self._bad(task_id, body, PlanError(message, "too_large"))]
        try:
            obj = json.loads(body)
        except json.JSONDecodeError as e:
            message = f"Task {task_id} is not valid JSON: {e.msg}."
            return [self._bad(task_id, body, PlanError(message, "not_a_call"))]
        except (RecursionError, MemoryError, ValueError):
            message = f"Task {task_id} is too large to read."
            return [self._bad(task_id, body, PlanError(message, "too_large"))]
        if not isinstance(obj, dict) or not isinstance(obj.get("tool"), str):
            message = f'Task {task_id} has no "tool".'
            return [self._bad(task_id, body, PlanError(message, "not_a_call"))]
        written = obj.get("id")
        written_id = written if isinstance(written, int) else task_id
        args = obj.get("args", obj.get("arguments", {}))
        if isinstance(args, dict):  # null: not given (a strict schema writes every name)
            args = {k: v for k, v in args.items() if v is not None}
        call = {obj["tool"]: args}
        try:
            tool, args, kwargs = parse_json_call(
                json.dumps(call), task_id, self._earlier, self._alias, written_id
            )
        except PlanLineError as e:
            return [self._bad(task_id, body, e.error, obj["tool"])]
        self._alias[written_id] = task_id
        self._earlier.add(task_id)
        deps = sorted(set(iter_refs(args)) | set(iter_refs(kwargs)))
        text = f"{task_id}. {json.dumps(call)}"
        return [PlanTask(id=task_id, tool=tool, args=args, kwargs=kwargs, deps=deps, text=text,
                         round=self.round)]  # fmt: skip

    def _bad(self, task_id: int, body: str, error: PlanError, tool: str = "?") -> PlanTask:
        text = body if len(body) <= 200 else body[:200] + "..."  # it is shown in prompts
        return PlanTask(id=task_id, tool=tool, text=text, error=error, round=self.round)

    def _end(self) -> None:
        self.done = True
        text = self.text.strip().removeprefix("```json").removeprefix("```")
        try:
            obj, _ = json.JSONDecoder().raw_decode(text.strip())
        except (RecursionError, MemoryError, ValueError):  # JSONDecodeError is a ValueError
            return
        if isinstance(obj, dict) and isinstance(obj.get("thought"), str) and obj["thought"]:
            self.thoughts.append(obj["thought"])

    def finish(self) -> list[PlanTask]:
        """The stream ended: a plan cut off before its end is a plan error."""
        if not self.done:
            self.errors.append(PlanError("The plan's JSON was cut off before its end.", "no_join"))
        self.done = True
        if self._count == 0:
            self.errors.append(PlanError("The plan has no tasks.", "empty_plan"))
        return []


@dataclass(frozen=True)
class JsonPlanDialect:
    """Plans as one JSON object; the Thought/Action joiner.

    Its plans are JSON under a schema (``json_schema_output``), so it is constrained on
    servers with structured outputs too, not only on those that take grammars.

    Args:
        schema: Builds the JSON schema sent as ``response_format`` when decoding is
            constrained (None: :func:`~llm_compiler.dialects.grammar.json_plan_schema`
            of the tools, in strict mode).
        joiner_examples: Few-shot joiner replies (``None``: built-in; ``""``: none).
    """

    json_schema_output: ClassVar[bool] = True
    schema: SchemaBuilder | None = None
    joiner_examples: str | None = None
    name: str = "json"
    examples: str = field(default=JSON_EXAMPLE)

    def planner_request(self, context: PlannerContext) -> LLMRequest:
        """The JSON planner prompt, with a response format when constrained."""
        ctx = context.prompt
        system = prompting.preamble(ctx.system_prompt) + JSON_INSTRUCTIONS.format(
            actions=render_actions(context.tools), next_id=context.next_id
        )
        system += "\n" + self.examples if self.examples else ""
        request = f"Question: {ctx.question}\n"
        if ctx.rounds:
            request += ctx.rendered_rounds() + "\nThe results above were not "
            request += f"enough: plan only what is missing, ids from {context.next_id}.\n"
        extras: dict[str, Any] = {}
        if context.constrained:
            extras["response_format"] = self.response_format(context.tools)
        if ctx.chat:
            return LLMRequest(
                messages=prompting.messages(system, ctx.history, request), extras=extras
            )
        prompt = prompting.completion_prompt(system, ctx.history, request)
        return LLMRequest(prompt=prompt, extras=extras)

    def response_format(self, tools: Sequence[BaseTool]) -> dict[str, Any]:
        """The ``response_format`` of a constrained planner request: the plan's schema
        (any JSON object when there are no tools to build it from)."""
        if self.schema is None and not tools:
            return {"type": "json_object"}
        if self.schema is not None:
            return {
                "type": "json_schema",
                "json_schema": {"name": "plan", "schema": self.schema(tools)},
            }
        spec = {"name": "plan", "schema": json_plan_schema(tools), "strict": True}
        return {"type": "json_schema", "json_schema": spec}

    def plan_parser(self, context: PlannerContext) -> JsonPlanStream:
        """An incremental parser of the JSON plan."""
        return JsonPlanStream(context)

    def joiner_request(self, context: PromptContext) -> LLMRequest:
        """The Thought/Action joiner prompt."""
        return JoinerInput(context, self.joiner_examples).llm_request()

    def parse_decision(self, text: str) -> JoinerDecision:
        """``Action: Finish(...)`` or ``Action: Replan(...)``."""
        return parse_joiner_output(text)
