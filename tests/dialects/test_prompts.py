"""The prompts, pinned."""

from __future__ import annotations

from llama_index.core.llms import ChatMessage
from llama_index.core.tools import FunctionTool

from llm_compiler.dialects import LLMCompilerDialect, PlannerContext
from llm_compiler.dialects.llmcompiler import prompts
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.dialects.thought_action import LAST_ROUND_NOTE, JoinerInput


def search(query: str, k: int = 3) -> str:
    """Search the web."""
    return query


TOOL = FunctionTool.from_defaults(fn=search)


def planner(question="q", examples=None, **prompt) -> prompts.PlannerInput:
    ctx = PlannerContext(prompt=PromptContext(question=question, **prompt), tools=[TOOL])
    return prompts.PlannerInput(ctx, examples)


def test_action_lines_show_signature_and_description():
    assert prompts.render_actions([TOOL]) == "1. search(query: str, k: int = 3): Search the web."


def test_planner_system_prompt():
    text = planner(examples="", system_prompt="Be brief.").system()
    assert text.startswith("Be brief.\n\nGiven a question, write a plan")
    assert "1. search(query: str, k: int = 3): Search the web.\n2. join(): collects" in text
    assert text.rstrip().endswith("Always end with `join()`, then write <END_OF_PLAN>.")


def test_default_examples_are_marked_as_illustrations():
    text = planner().system()
    assert prompts.EXAMPLE_NOTE in text and 'search("Eiffel Tower")' in text
    assert "###" not in text  # a separator the joiner could mistake for an answer's end
    assert prompts.EXAMPLE_NOTE not in planner(examples="X\n").system()


def test_replan_request_shows_history_and_next_id():
    record = RoundRecord(
        tasks=[
            TaskRecord(1, "search", '1. search("a")', "A"),
            TaskRecord(2, "search", "2. search($9)", "Error: bad ref", is_error=True),
        ],
        errors=["The plan did not end with join()."],
        thought="not enough",
        reason="look up b",
    )
    ctx = PlannerContext(
        prompt=PromptContext(question="q?", rounds=[record]), tools=[TOOL], next_id=4
    )
    assert prompts.PlannerInput(ctx).request() == (
        "Question: q?\n"
        '1. search("a")\nObservation: A\n2. search($9)\nObservation: Error: bad ref\n'
        "Plan error: The plan did not end with join().\nThought: not enough\nReplan: look up b\n"
        + prompts.REPLAN_NOTE.format(next_id=4)
    )


def test_completion_prompts_end_where_the_model_continues():
    history = [ChatMessage(role="user", content="hi"), ChatMessage(role="assistant", content="yo")]
    plan = planner("q?", examples="", history=history, chat=False).prompt()
    assert "Conversation so far:\nuser: hi\nassistant: yo\n" in plan
    assert plan.endswith("\nQuestion: q?\n")
    request = JoinerInput(PromptContext("q?", last_round=True, chat=False), "").llm_request()
    assert request.prompt is not None and request.prompt.endswith(
        "Question: q?\n\nAnswer the question: q?\nThought:"
    )
    assert request.prefill == "Thought:" and LAST_ROUND_NOTE.strip() in request.prompt


def test_chat_messages_keep_only_the_conversation():
    history = [
        ChatMessage(role="system", content="other agent's system prompt"),
        ChatMessage(role="user", content="hi"),
        ChatMessage(role="tool", content="tool output"),
        ChatMessage(role="assistant", content="yo"),
    ]
    request = LLMCompilerDialect().joiner_request(PromptContext("q?", history))
    assert request.messages is not None
    assert [m.role.value for m in request.messages] == ["system", "user", "assistant", "user"]
    assert LAST_ROUND_NOTE.strip() not in (request.messages[0].content or "")


def test_examples_never_teach_a_tool_the_run_does_not_have():
    def play(artist: str, minutes: int) -> str:
        """Play an artist."""
        return artist

    ctx = PlannerContext(prompt=PromptContext("q"), tools=[FunctionTool.from_defaults(fn=play)])
    text = prompts.PlannerInput(ctx).system()
    assert "search(" not in text and prompts.EXAMPLE_NOTE not in text
    assert prompts.GENERATED_NOTE in text
    assert (
        "Question: Play for artist 1, 3 and artist 2, 7.\n"
        '1. play(artist="artist 1", minutes=3)\n2. play(artist="artist 2", minutes=7)\n'
        "3. join()" in text
    )


def test_generated_examples_use_plausible_values_and_chain_the_second_tool():
    from llm_compiler.dialects.llmcompiler.examples import own_tools_example
    from llm_compiler.tools.schema import SchemaTool

    number, unit = {"type": "number"}, {"type": "string", "enum": ["celsius", "fahrenheit"]}
    convert = SchemaTool.from_definition(
        {
            "name": "convert",
            "parameters": {
                "type": "object",
                "properties": {"celsius": number, "unit": unit},
                "required": ["celsius", "unit"],
            },
        },
        handler=lambda name, args: None,
    )

    async def get_weather(city: str) -> float:
        """Weather."""
        return 1.0

    # the lookup-like tool (a text parameter) comes first whatever the order given
    text = own_tools_example([convert, FunctionTool.from_defaults(fn=get_weather)])
    assert text == (
        "Question: Get weather for city 1 and city 2, then convert celsius.\n"
        '1. get_weather(city="city 1")\n2. get_weather(city="city 2")\n'
        '3. convert(celsius=$1, unit="celsius")\n4. join()\n<END_OF_PLAN>\n'
    )
    # a tool only a JSON line can call gives no example: the built-in ones are shown
    odd = SchemaTool.from_definition(
        {"name": "my tool", "parameters": {"type": "object", "properties": {}}},
        handler=lambda name, args: None,
    )
    assert own_tools_example([odd]) == ""
    ctx = PlannerContext(prompt=PromptContext("q"), tools=[odd], constrained=True)
    assert prompts.PLANNER_EXAMPLES in prompts.PlannerInput(ctx).system()


def test_constrained_prompts_show_builtin_then_varied_own_examples_by_default():
    async def get_weather(city: str) -> float:
        """Weather."""
        return 1.0

    def to_f(celsius: float) -> float:
        """Convert."""
        return celsius

    def play(artist: str) -> str:
        """Play an artist."""
        return artist

    def system(*fns) -> str:
        tools = [FunctionTool.from_defaults(fn=f) for f in fns]
        ctx = PlannerContext(prompt=PromptContext("q"), tools=tools, constrained=True)
        return prompts.PlannerInput(ctx).system()

    text = system(get_weather, to_f)
    builtin_at = text.index(prompts.PLANNER_EXAMPLES)
    parallel_at = text.index(
        '1. get_weather(city="city 1")\n2. get_weather(city="city 2")\n3. join()'
    )
    chain = '1. get_weather(city="city 1")\n2. get_weather(city="city 2")\n3. to_f(celsius=$1)\n'
    chain_at = text.index(chain)
    assert prompts.VARIED_NOTE in text and builtin_at < parallel_at < chain_at  # own tools last
    # nothing flows from one tool to another: the built-in examples alone
    text = system(play)
    assert prompts.EXAMPLE_NOTE in text and 'play(artist="' not in text


def test_schema_tools_never_chain_and_values_are_placeholders():
    from llm_compiler.dialects.llmcompiler.examples import own_tools_example
    from llm_compiler.tools.schema import SchemaTool

    def tool(name: str, props: dict) -> SchemaTool:
        schema = {"type": "object", "properties": props, "required": list(props)}
        return SchemaTool.from_definition(
            {"name": name, "parameters": schema}, handler=lambda n, a: None
        )

    weather = tool("weather.get", {"location": {"type": "string"}})
    convert = tool("to_f", {"celsius": {"type": "number"}})
    play = tool("play", {"artist": {"type": "string"}, "minutes": {"type": "integer"}})
    # no declared return type: independent calls only; values named after the parameter
    assert own_tools_example([weather, convert]) == (
        "Question: Weather get for location 1 and location 2, then to f 12.5.\n"
        '1. weather.get(location="location 1")\n2. weather.get(location="location 2")\n'
        "3. to_f(celsius=12.5)\n4. join()\n<END_OF_PLAN>\n"
    )
    assert 'play(artist="artist 1", minutes=3)' in own_tools_example([play])
