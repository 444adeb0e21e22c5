"""llama.cpp options that keep the planner's prompt prefix evaluated across questions.

llama.cpp reuses the KV cache only for the prefix shared with the *previous* prompt; the
joiner's prompt comes between two planner prompts, so every question re-reads the
planner's long few-shot prefix. With a RAM prompt cache the server saves its state after
each completion and restores the saved state with the longest shared prefix, so the
next question's planner evaluates only its own question.
"""

from __future__ import annotations

#: ``LocalLLMServer(extra_args=...)`` options: a 256 MB RAM prompt cache.
PROMPT_CACHE_ARGS = ["--cache", "True", "--cache_type", "ram", "--cache_size", str(256 << 20)]
