"""Latency benchmarks of LLMCompilerWorkflow against llama-index ReActAgent and FunctionAgent.

Run ``python -m benchmarks.run`` (``make bench``); profile the hot path with
``python -m benchmarks.profile``. Results land in ``benchmarks/results/``.

Every system talks to the same latency-modelled scripted LLM (time to first token plus
tokens per second) and calls the same tools with configured latencies, so differences come
from orchestration alone. Benchmarks measure; they never assert timing (they do assert
that every system made exactly the expected tool calls and gave the expected answer).
"""
