"""Chain-of-Abstraction prompts: the reasoning with inline calls, and the answer from it.

Tools are shown as Python function signatures built from their JSON schema, as the CoA
paper and the LlamaIndex CoA pack did. Both prompts can be replaced by templates (the
legacy pack's variables: ``{functions}`` and ``{question}``; ``{question}`` and
``{prev_reasoning}``).
"""

from __future__ import annotations

from collections.abc import Sequence

from llama_index.core.tools import BaseTool

from llm_compiler.errors import ConfigurationError
from llm_compiler.tools import render as _tools

REASONING_INSTRUCTIONS = """\
Answer the question by writing out your reasoning. Wherever a value must come from one \
of the functions below, write an inline call instead of the value:
[FUNC function_name(arguments) = yN]
- Name the results y1, y2, y3 ... in order. A later call may use an earlier result by its \
name, as an argument (multiply(y1, 3)) or inside a string (search("birthplace of y1")).
- Arguments are Python literals: quoted strings, numbers, lists, or name=value.
- Calls that do not need each other's results run at the same time: only use a result \
where you need it.
- Use only these functions. If the question needs none, just answer it.
- Do not guess the results: they are filled in after the calls have run.

Functions:
```python
{functions}
```
"""

REASONING_EXAMPLES = """\
Question: A shop sold 12 boxes of 8 pens and 5 boxes of 20 pens. How many pens was that?
Reasoning: The small boxes held [FUNC multiply(12, 8) = y1] pens and the large ones \
[FUNC multiply(5, 20) = y2] pens, so the shop sold [FUNC add(y1, y2) = y3] pens.
Question: Who wrote Hamlet, and where was the author born?
Reasoning: Hamlet was written by [FUNC search("author of Hamlet") = y1], who was born in \
[FUNC search("birthplace of y1") = y2].
Question: How many sides does a triangle have?
Reasoning: A triangle has 3 sides.
"""

EXAMPLE_NOTE = "The examples illustrate the format; their functions may differ from yours.\n"

ANSWER_INSTRUCTIONS = """\
Below is a reasoning about a question. Its function calls have run and each result is \
written in place: [FUNC call(arguments) = result]. Write the final answer to the \
question from it: concise, complete, in plain words, without the [FUNC ...] notation. \
If a call failed, say what could not be found and answer with what is known.
"""

ANSWER_EXAMPLES = """\
Question: A shop sold 12 boxes of 8 pens and 5 boxes of 20 pens. How many pens was that?
Reasoning: The small boxes held [FUNC multiply(12, 8) = 96] pens and the large ones \
[FUNC multiply(5, 20) = 100] pens, so the shop sold [FUNC add(96, 100) = 196] pens.
Answer: The shop sold 196 pens.
"""


def render_function(tool: BaseTool) -> str:
    """``def name(a: int, b: str = 'x'):`` and the description as its docstring."""
    doc = _tools.description(tool).replace('"""', "'''")
    return f'def {_tools.signature(tool)}:\n    """{doc}"""'


def render_functions(tools: Sequence[BaseTool]) -> str:
    """Every tool as a Python function signature."""
    return "\n\n".join(render_function(t) for t in tools)


def check_template(template: str, *fields: str) -> str:
    """`template` if ``str.format`` fills it with `fields` alone, else a ConfigurationError."""
    try:
        template.format(**dict.fromkeys(fields, ""))
    except (KeyError, IndexError, ValueError) as e:
        raise ConfigurationError(
            f"The template must use only {{{'}, {'.join(fields)}}} (double other braces): "
            f"{type(e).__name__}: {e}."
        ) from None
    return template
