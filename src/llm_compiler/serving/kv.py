"""llama.cpp options that keep the planner's prompt prefix evaluated across questions.

llama.cpp reuses its KV cache only for the prefix shared with the *previous* prompt, and
the joiner's prompt comes between two planner prompts: without help, every question
re-reads the planner's few-shot prefix (about 540 tokens of the demo's 545). With a RAM
prompt cache, llama-cpp-python saves its state after each completion and, for a new
prompt, restores the saved state with the longest shared prefix: the next planner
evaluates only its question (7 tokens instead of 543 in ``benchmarks.first_task``).

A saved state includes the logits buffer, ``n_batch`` x vocabulary floats: 512 MB at
the default ``n_batch`` of 512 with Gemma 3's 262k-token vocabulary, which makes saving
and restoring cost more than the evaluation it saves. ``n_batch`` 64 cuts it to 64 MB
for about 5 % slower cold prompts.
"""

from __future__ import annotations

#: ``LocalLLMServer(extra_args=...)`` options: RAM prompt cache, n_batch 64. The cache counts
#: 64 MB of llama.cpp state (about 6 entries); each entry also holds 64 MB of logits.
PROMPT_CACHE_ARGS = [
    "--n_batch", "64",
    "--cache", "True",
    "--cache_type", "ram",
    "--cache_size", str(64 << 20),
]  # fmt: skip
