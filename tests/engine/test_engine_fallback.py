"""The non-streaming fallback, for LLMs that cannot stream however they say so."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.llms import CompletionResponse, CustomLLM, LLMMetadata

from llm_compiler import LLMCompilerWorkflow

PLAN = '1. search("a")\n2. join()<END_OF_PLAN>'
FINISH = "Thought: found.\nAction: Finish(It is <a>.)"


async def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


class WholeRepliesOnly(CustomLLM):
    """A CustomLLM that cannot stream: its stream raises on the first chunk (lazily)."""

    chat_model: bool = False
    replies: list[str] = []
    streams_asked: int = 0

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="whole", is_chat_model=self.chat_model)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self.replies.pop(0))

    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        self.streams_asked += 1
        raise NotImplementedError("no streaming")


@pytest.mark.parametrize("chat", [False, True])
async def test_a_stream_that_raises_not_implemented_on_first_chunk_falls_back(chat):
    llm = WholeRepliesOnly(chat_model=chat, replies=[PLAN, FINISH])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    out = await wf.run(user_msg="a?")
    assert str(out) == "It is <a>."
    assert llm.streams_asked == 2 and llm.replies == []  # both calls asked, then fell back
    assert out.summary.task(1).output == "<a>"


async def test_not_implemented_after_the_first_chunk_is_a_failed_call():
    """Only a stream that gives nothing is retried whole: a stream that broke midway fails."""
    from llm_compiler.engine.llm import LLMRequest, stream_call
    from llm_compiler.errors import LLMCallError

    class Breaks(WholeRepliesOnly):
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
            yield CompletionResponse(text="1.", delta="1.")
            raise NotImplementedError("midway")

    llm = Breaks(replies=["never"])
    with pytest.raises(LLMCallError, match="midway"):
        await stream_call(
            llm,
            LLMRequest(prompt="p"),
            phase="planner",
            round=0,
            on_delta=lambda d: False,
            flush=lambda: None,
        )
    assert llm.replies == ["never"]
