"""One streaming helper for every LLM call the engine makes (planner and joiner).

It talks to chat and completion models alike, passes per-request extras (a grammar, a
response format) to servers that take them, cuts the text at stop sequences client-side,
coalesces output that arrives in a burst into one flush, and translates failures: only
an error raised by the LLM becomes :class:`~llm_compiler.errors.LLMCallError`; an error
in the caller's own callbacks (a parser, an event) propagates as it is.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, cast

from llama_index.core.llms import LLM

from llm_compiler.decoding import DECODINGS as DECODINGS
from llm_compiler.decoding import Decoding as Decoding
from llm_compiler.dialects.base import LLMRequest
from llm_compiler.errors import ConfigurationError, LLMCallError
from llm_compiler.tracing.metrics import record_llm
from llm_compiler.tracing.prices import ModelPrice
from llm_compiler.tracing.spans import Active
from llm_compiler.tracing.tracer import Tracer
from llm_compiler.tracing.usage import LLMCallUsage, measure_call, reported_counts

#: Longest wait for a usage report after the text we need has arrived.
USAGE_DRAIN_SECONDS = 0.5
#: Completion endpoints (OpenAI's, llama.cpp's) stop after 16 tokens unless told otherwise.
COMPLETION_MAX_TOKENS = 2048


@dataclass
class TokenUsage:
    """Tokens an LLM reported while a call streams (zero, and ``reported`` false, when it
    reports none): the raw counts :func:`metered_call` turns into the call's one usage
    record, an :class:`~llm_compiler.tracing.usage.LLMCallUsage`.

    ``cached_tokens`` is the part of ``prompt_tokens`` read from the provider's prompt cache.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    reported: bool = False

    def add(self, other: TokenUsage | None) -> None:
        """Add another call's counts."""
        if other is not None:
            self.prompt_tokens += other.prompt_tokens
            self.completion_tokens += other.completion_tokens
            self.cached_tokens += other.cached_tokens
            self.reported = self.reported or other.reported

    def counts(self) -> tuple[int, int, int] | None:
        """(prompt, completion, cached) if the LLM reported them, else None."""
        return (
            (self.prompt_tokens, self.completion_tokens, self.cached_tokens)
            if self.reported
            else None
        )


def is_chat(llm: LLM) -> bool:
    """Whether to talk to `llm` with messages (else with one completion prompt)."""
    try:
        return bool(llm.metadata.is_chat_model)
    except Exception:  # a metadata lookup that fails (unknown model names) means chat
        return True


def is_openai_protocol(llm: LLM) -> bool:
    """Whether `llm` is llama-index's OpenAI client (or OpenAILike): it sends extras."""
    # An OpenAI instance means its module is loaded: look it up rather than import it (1 s).
    module = sys.modules.get("llama_index.llms.openai")
    openai_cls = getattr(module, "OpenAI", None)
    return openai_cls is not None and isinstance(llm, openai_cls)


def decoding(llm: LLM) -> Decoding:
    """The constrained decoding `llm`'s server takes: ``grammar`` (a GBNF ``grammar`` in
    the request, as llama.cpp's servers take it), ``json_schema`` (structured outputs: a
    JSON schema in ``response_format`` only, as OpenAI's API) or ``off``.

    A client declares it as ``llm_compiler_decoding``; one that only declares
    ``llm_compiler_constrained`` takes grammars.
    """
    declared = getattr(llm, "llm_compiler_decoding", None)
    if declared in DECODINGS:
        return cast("Decoding", declared)
    return "grammar" if getattr(llm, "llm_compiler_constrained", False) else "off"


def constrained_for(llm: LLM, dialect: object) -> bool:
    """Whether to ask `llm`'s server to constrain `dialect`'s output: a grammar server
    takes every dialect's constraints, a structured-output server only those of a
    dialect whose plans are JSON under a schema (``json_schema_output``)."""
    kind = decoding(llm)
    return kind == "grammar" or (
        kind == "json_schema" and bool(getattr(dialect, "json_schema_output", False))
    )


def _extras(llm: LLM, extras: Mapping[str, Any]) -> dict[str, Any]:
    """The request extras `llm`'s server takes (no ``grammar`` for a structured-output one)."""
    if decoding(llm) == "json_schema":
        return {k: v for k, v in extras.items() if k != "grammar"}
    return dict(extras)


def _call_kwargs(llm: LLM, request: LLMRequest) -> dict[str, Any]:
    """Extra request fields: stops, a token budget and extras for OpenAI-protocol clients."""
    kwargs: dict[str, Any] = {}
    extras = _extras(llm, request.extras) if request.extras else {}
    if getattr(llm, "accepts_request_extras", False) and extras:
        kwargs["extra_body"] = extras
    if not is_openai_protocol(llm):
        return kwargs  # others get no stop list: we cut client-side
    if request.stop:
        kwargs["stop"] = list(request.stop)[:4]
    # Ask for the usage report a stream otherwise leaves out (dropped when not streaming).
    kwargs["stream_options"] = {"include_usage": True}
    if request.messages is None and getattr(llm, "max_tokens", None) is None:
        kwargs["max_tokens"] = COMPLETION_MAX_TOKENS
    if extras:
        kwargs["extra_body"] = extras
    return kwargs


def _usage(response: Any) -> TokenUsage | None:
    """Token counts from a llama-index response, where the provider sent them."""
    raw = getattr(response, "raw", None)
    usage = raw.get("usage") if isinstance(raw, Mapping) else getattr(raw, "usage", None)
    counts = reported_counts(usage)
    if counts is None:
        extra = getattr(response, "additional_kwargs", None) or {}
        counts = reported_counts(extra)
    return None if counts is None else TokenUsage(*counts, reported=True)


async def stream_text(
    llm: LLM, request: LLMRequest, usage: TokenUsage | None = None
) -> AsyncGenerator[str, None]:
    """Yield text deltas of one call; fall back to the non-streaming API when needed.

    An LLM that cannot stream raises NotImplementedError when asked for a stream, or
    (llama-index's ``CustomLLM``) on the stream's first chunk: either way the call is
    made once more without streaming. Reported token counts are added to `usage`.
    """
    kwargs = _call_kwargs(llm, request)
    pieces = _pieces(llm, request, kwargs)
    last: Any = None
    try:
        try:
            delta, last = await anext(pieces)
        except NotImplementedError:
            text, response = await _whole(llm, request, kwargs)
            if usage is not None:
                usage.add(_usage(response))
            yield text
            return
        except StopAsyncIteration:
            return
        if delta:
            yield delta
        async for piece in pieces:
            delta, last = piece
            if delta:
                yield delta
    finally:
        await pieces.aclose()
    if usage is not None:
        usage.add(_usage(last))


async def _pieces(
    llm: LLM, request: LLMRequest, kwargs: dict[str, Any]
) -> AsyncGenerator[tuple[str, Any], None]:
    """The streamed call's (new text, chunk) pairs."""
    if request.messages is None:
        assert request.prompt is not None
        cgen = await llm.astream_complete(request.prompt, formatted=True, **kwargs)
        async for piece in cgen:
            yield piece.delta or "", piece
        return
    gen = await llm.astream_chat(list(request.messages), **kwargs)
    text = ""
    async for chunk in gen:
        delta = chunk.delta
        if delta is None:  # some models send the text so far, some only the new piece
            content = chunk.message.content or ""
            delta = content[len(text) :] if content.startswith(text) else content
        text += delta
        yield delta, chunk


async def _whole(llm: LLM, request: LLMRequest, kwargs: dict[str, Any]) -> tuple[str, Any]:
    """The call made without streaming: its text and its response."""
    if request.messages is None:
        assert request.prompt is not None
        completion = await llm.acomplete(request.prompt, formatted=True, **kwargs)
        return completion.text, completion
    response = await llm.achat(list(request.messages), **kwargs)
    return response.message.content or "", response


class _Outbox:
    """Coalesces what a stream produced until the event loop next gets control.

    ``touch()`` schedules ``flush`` with ``call_soon``; it runs as soon as the stream
    waits for the model. A model that streams token by token still gets one flush per
    chunk, with no added delay, while chunks that arrive in a burst (one network read, a
    fast local model) become one flush instead of hundreds.
    """

    def __init__(self, flush: Callable[[], None]) -> None:
        self._flush = flush
        self._handle: asyncio.Handle | None = None
        self._error: Exception | None = None

    def touch(self) -> None:
        if self._error is not None:
            raise self._error
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        self._handle = None
        try:
            self._flush()
        except Exception as e:  # surfaced by the next touch() or close()
            self._error = e

    def discard(self) -> None:
        """Drop what is pending: the call is failing or being cancelled."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def close(self) -> None:
        """Flush what is left, now; raise what a flush raised."""
        if self._handle is not None:
            self._handle.cancel()
        self._run()
        if self._error is not None:
            raise self._error


async def stream_call(
    llm: LLM,
    request: LLMRequest,
    *,
    phase: str,
    round: int,
    on_delta: Callable[[str], bool],
    flush: Callable[[], None],
    usage: TokenUsage | None = None,
) -> str:
    """Run one streamed call; return its text (prefill included, cut at a stop).

    `on_delta` gets each new piece of text and returns True to stop reading; `flush`
    runs once per burst of deltas (and once at the end) to publish what they produced.
    Reported token counts are added to `usage`; after an early stop on an OpenAI-protocol
    client, the rest of the stream is read briefly for its usage report (see ``_drain``).
    """
    text = request.prefill
    longest_stop = max(map(len, request.stop), default=0)
    outbox = _Outbox(flush)
    stream = stream_text(llm, request, usage)
    try:
        while True:
            try:
                delta = await anext(stream)
            except StopAsyncIteration:
                break
            except Exception as e:
                raise LLMCallError(phase, round, e) from e
            start = max(0, len(text) - longest_stop)
            text += delta
            cut = _first_stop(text, request.stop, start)
            if cut is not None:
                delta = delta[: max(0, len(delta) - (len(text) - cut))]
                text = text[:cut]
            done = on_delta(delta) if delta else False
            outbox.touch()
            if done or cut is not None:
                if usage is not None and is_openai_protocol(llm):
                    await _drain(stream)
                break
    except BaseException:
        outbox.discard()
        raise
    finally:
        await stream.aclose()
    outbox.close()
    return text


async def _drain(stream: AsyncGenerator[str, None]) -> None:
    """Read the rest of a stream we stopped early, for the usage report in its last chunk.

    The same stops went to the server, so what is left is a few tokens at most; a stream
    that goes on longer than :data:`USAGE_DRAIN_SECONDS` is dropped (tokens then counted).
    """

    async def rest() -> None:
        async for _ in stream:
            pass

    try:
        await asyncio.wait_for(rest(), USAGE_DRAIN_SECONDS)
    except Exception:  # noqa: BLE001 - a late failure after the text we need is no failure
        pass


def _first_stop(text: str, stops: Sequence[str], start: int) -> int | None:
    """Where the first stop sequence begins at or after `start`, if any (new text only)."""
    found = [i for s in stops if s and (i := text.find(s, start)) >= 0]
    return min(found) if found else None


def model_name(llm: LLM) -> str | None:
    """The model name `llm` reports (None if its metadata lookup fails or names none)."""
    try:
        name = llm.metadata.model_name
    except Exception:  # unknown model names make some clients' metadata raise
        return None
    return name or None


#: The role of the model call being made: ``planner`` or ``joiner`` (None outside one).
#: A model (a test double, a router) may read it to answer by role.
CALL_ROLE: ContextVar[str | None] = ContextVar("llm_compiler_call_role", default=None)


@dataclass
class Metered:
    """What a metered call needs besides the request: its span's tracer, run and prices."""

    tracer: Tracer
    run_id: str
    prices: Mapping[str, ModelPrice]


async def metered_call(
    llm: LLM,
    request: LLMRequest,
    meter: Metered,
    *,
    phase: Literal["planner", "joiner"],
    round: int,
    on_delta: Callable[[str], bool],
    flush: Callable[[], None],
) -> tuple[str, LLMCallUsage]:
    """:func:`stream_call` in a planner or joiner span; returns the text and its usage.

    Tokens are the server's report where it gives one, else counted; the cost comes from
    `meter.prices` (None for a model without a price).
    """
    messages = None if request.messages is None else list(request.messages)
    model = model_name(llm)
    span = meter.tracer.start_llm(meter.run_id, round, phase, model, messages, request.prompt)
    usage, started = TokenUsage(), time.time()
    role = CALL_ROLE.set(phase)
    try:
        with Active(span):
            text = await stream_call(
                llm, request, phase=phase, round=round, on_delta=on_delta, flush=flush, usage=usage
            )
    except BaseException as e:
        if span is not None:
            span.end(error=e)
        raise
    finally:
        CALL_ROLE.reset(role)
    sent = request.prompt if messages is None else "\n".join(m.content or "" for m in messages)
    call = await measure_call(
        phase=phase,
        round=round,
        model=model,
        reported=usage.counts(),
        prompt_text=sent or "",
        reply=text[len(request.prefill) :],
        prices=meter.prices,
        started_at=started,
        finished_at=time.time(),
    )
    meter.tracer.end_llm(span, call, text, messages, request.prompt)
    record_llm(call, messages is not None)
    return text, call


def default_llm() -> LLM:
    """llama-index's ``Settings.llm``, or a ConfigurationError that says what to pass.

    llama-index's own default is OpenAI, which fails without an API key with an error
    that names neither ``llm=`` nor the offline model.
    """
    from llama_index.core.settings import Settings

    try:
        return Settings.llm
    except (ValueError, ImportError) as e:
        raise ConfigurationError(
            "No llm= was given and llama-index's Settings.llm has none "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Pass "
            "llm=resolve_llm() (`from llm_compiler import resolve_llm`: OpenAI with "
            "OPENAI_API_KEY, any OpenAI-compatible server with LLM_COMPILER_API_BASE, "
            "else the embedded offline model), a hosted LLM such as "
            '`llama_index.llms.openai.OpenAI(model="gpt-4o-mini")`, or set Settings.llm.'
        ) from e


def require_llm(llm: object) -> None:
    """Reject, at construction, an `llm` that is not a llama-index LLM (None: Settings.llm).

    Raises:
        ConfigurationError: With the calls that give a right one.
    """
    if llm is None or isinstance(llm, LLM):
        return
    kind = f"{type(llm).__module__}.{type(llm).__qualname__}"
    raise ConfigurationError(
        f"llm= must be a llama-index LLM (llama_index.core.llms.LLM), not a {kind}. "
        "The offline model: `from llm_compiler import resolve_llm` and "
        "`llm=resolve_llm()`; a hosted one, e.g. "
        '`from llama_index.llms.openai import OpenAI` and `llm=OpenAI(model="gpt-4o-mini")`.'
    )
