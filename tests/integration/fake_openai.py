"""A scripted, stdlib-only fake of an OpenAI-compatible server, for tests.

It serves ``POST /v1/chat/completions`` and ``POST /v1/completions`` on 127.0.0.1 (a free
port), streaming (SSE over chunked transfer encoding, like uvicorn) or not, and records
every request body. Answers come, in order of precedence, from:

1. the queue filled by :meth:`FakeOpenAI.script` (one answer per request);
2. :attr:`FakeOpenAI.responder`, a function of the request body;
3. :attr:`FakeOpenAI.default_text`.

Faults are armed for the next requests: :meth:`FakeOpenAI.fail_next` answers HTTP errors,
:meth:`FakeOpenAI.cut_next` drops the connection mid-stream, :meth:`FakeOpenAI.stall_next`
holds the request (until ``close()``) without answering.

A reply can also be *held* until the test says so: ``Reply(hold_after=2, hold=event)``
sends two deltas, then waits until the ``threading.Event`` `event` is set (say, by a tool
that runs while the plan still streams) and sends the rest. :attr:`Reply.reached` is set
when the hold point is reached.

Example::

    with FakeOpenAI() as fake:
        fake.script("1. search('x')\\njoin()<END_OF_PLAN>", "Action: Finish(42)")
        llm = OpenAILike(model="fake", api_base=fake.base_url, api_key="none")
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
STALL_AT_ONCE = -1  # Reply.stall_after: stall before sending the response headers


@dataclass
class Reply:
    """One scripted answer.

    Attributes:
        text: The full answer; truncated at the first ``stop`` sequence of the request.
        chunk_size: Characters per streamed delta.
        status: HTTP status; anything but 200 answers an OpenAI-style error body.
        cut_after: Streamed deltas to send before dropping the connection (no ``[DONE]``,
            no final chunk terminator).
        stall_after: Streamed deltas to send before holding the request unanswered
            until the server closes (``STALL_AT_ONCE``: before the headers).
        hold_after: Streamed deltas to send before waiting for `hold` (a non-streamed
            answer waits before it is sent); then the answer goes on (or is cut or stalls,
            if `cut_after` / `stall_after` say so at that point). ``close()`` ends a hold by
            dropping the connection.
        hold: The ``threading.Event`` a hold waits for; required with `hold_after`.
        reached: Set by the server when the hold point is reached (for tests that need
            to know the stream is being held).
    """

    text: str = ""
    chunk_size: int = 3
    status: int = 200
    cut_after: int | None = None
    stall_after: int | None = None
    hold_after: int | None = None
    hold: threading.Event | None = None
    reached: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        if self.hold_after is not None and self.hold is None:
            raise ValueError("Reply(hold_after=...) needs hold=threading.Event()")


Responder = Callable[[dict[str, Any]], "str | Reply"]


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt text of a request: ``prompt``, or the chat messages joined by newlines."""
    if "prompt" in body:
        prompt = body["prompt"]
        return prompt if isinstance(prompt, str) else "\n".join(map(str, prompt))
    parts = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, list):  # content blocks
            content = "".join(block.get("text", "") for block in content)
        parts.append(f"{message.get('role')}: {content or ''}")
    return "\n".join(parts)


def apply_stop(text: str, stop: str | list[str] | None) -> tuple[str, bool]:
    """Cut `text` at the earliest stop sequence; also say whether one was found."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cuts = [text.index(s) for s in stops if s and s in text]
    return (text[: min(cuts)], True) if cuts else (text, False)


def plan_text(*calls: str, thought: str | None = None) -> str:
    """A planner answer: numbered `calls`, then ``join()<END_OF_PLAN>``.

    Example: ``plan_text("search('Paris')", "calculator('$1 * 2')")``.
    """
    lines = [f"Thought: {thought}"] if thought else []
    lines += [f"{n}. {call}" for n, call in enumerate(calls, 1)]
    lines.append(f"{len(calls) + 1}. join()<END_OF_PLAN>")
    return "\n".join(lines)


def finish_text(answer: str, thought: str = "I can answer now.") -> str:
    """A joiner answer that finishes with `answer`."""
    return f"Thought: {thought}\nAction: Finish({answer})"


def replan_text(reason: str, thought: str = "I need more information.") -> str:
    """A joiner answer that asks for a new plan."""
    return f"Thought: {thought}\nAction: Replan({reason})"


def route(rules: dict[str, list[str | Reply]], fallback: str = "") -> Responder:
    """A responder that answers by prompt content, e.g. one queue for planner, one for joiner.

    Args:
        rules: Maps a substring of the prompt to the answers given, in order, to requests
            whose prompt contains it; the first matching rule with answers left wins.
        fallback: The answer when no rule matches.

    Example::

        fake.responder = route({"END_OF_PLAN": [plan], "Action:": ["Action: Finish(4)"]})
    """
    queues = {key: deque(answers) for key, answers in rules.items()}
    lock = threading.Lock()

    def respond(body: dict[str, Any]) -> str | Reply:
        prompt = prompt_of(body)
        with lock:
            for key, answers in queues.items():
                if key in prompt and answers:
                    return answers.popleft()
        return fallback

    return respond


@dataclass
class FakeOpenAI:
    """The fake server; start it with ``start()`` or a ``with`` block.

    Attributes:
        requests: Every request received, as ``{"path", "headers", "body"}``, in order.
        responder: Answers requests when the script queue is empty.
        default_text: The answer when there is no script and no responder.
        stream_usage: The usage a stream reports in a last chunk when the request asks
            for it (``stream_options.include_usage``), as OpenAI does.
    """

    requests: list[dict[str, Any]] = field(default_factory=list)
    responder: Responder | None = None
    default_text: str = "Hello from the fake server."
    stream_usage: dict[str, Any] | None = None
    _queue: deque[str | Reply] = field(default_factory=deque)
    _faults: deque[Reply] = field(default_factory=deque)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)
    _server: ThreadingHTTPServer | None = None

    # -- control ---------------------------------------------------------------------

    def start(self) -> FakeOpenAI:
        """Listen on 127.0.0.1 on a free port, serving from a daemon thread."""
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def close(self) -> None:
        """Release stalled requests and stop serving."""
        self._closing.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port listened on."""
        assert self._server is not None, "the fake server is not started"
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """The OpenAI ``api_base``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def script(self, *answers: str | Reply) -> None:
        """Queue answers for the next requests, one each."""
        with self._lock:
            self._queue.extend(answers)

    def reset(self) -> None:
        """Forget scripted answers, armed faults and recorded requests."""
        with self._lock:
            self._queue.clear()
            self._faults.clear()
            self.requests.clear()

    def fail_next(self, n: int = 1, status: int = 429) -> None:
        """Answer the next `n` requests with HTTP `status` (before any scripted answer)."""
        with self._lock:
            self._faults.extend(Reply(status=status) for _ in range(n))

    def stall_next(self, after_chunks: int | None = None) -> None:
        """Hold the next request unanswered until ``close()``.

        Args:
            after_chunks: ``None`` stalls before the response headers; a number stalls a
                streamed answer after that many deltas.
        """
        with self._lock:
            stall_after = STALL_AT_ONCE if after_chunks is None else after_chunks
            self._faults.append(Reply(stall_after=stall_after))

    def cut_next(self, after_chunks: int = 2) -> None:
        """Drop the connection of the next streamed answer after `after_chunks` deltas."""
        with self._lock:
            self._faults.append(Reply(cut_after=after_chunks))

    # -- inspection --------------------------------------------------------------------

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of every request, in order."""
        return [r["body"] for r in self.requests]

    @property
    def last_body(self) -> dict[str, Any]:
        """The JSON body of the last request."""
        return self.requests[-1]["body"]

    # -- answering ---------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            fault = self._faults.popleft() if self._faults else None
            if fault is not None and (fault.status != 200 or fault.stall_after == STALL_AT_ONCE):
                return fault  # answered instead of any scripted answer
            scripted = self._queue.popleft() if self._queue else None
        if scripted is not None:
            answer = scripted
        elif self.responder is not None:
            answer = self.responder(body)
        else:
            answer = self.default_text
        reply = Reply(text=answer) if isinstance(answer, str) else answer
        if fault is not None:  # a mid-stream fault interrupts the answer it applies to
            reply = replace(reply, cut_after=fault.cut_after, stall_after=fault.stall_after)
        return reply


class _Server(ThreadingHTTPServer):
    # The default backlog (5) drops the SYNs of a burst of concurrent clients, which then
    # retry only after a 1 s TCP timeout.
    request_queue_size = 128

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet when a client drops its connection (timeouts, cut streams)."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked streams, as real servers do
    fake: FakeOpenAI

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if self.path not in (CHAT_PATH, COMPLETIONS_PATH):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        reply = self.fake._next_reply(body)
        if reply.status != 200:
            self._send_error_reply(reply.status)
            return
        if reply.stall_after is not None and (
            reply.stall_after == STALL_AT_ONCE or not body.get("stream")
        ):
            self._stall()
            return
        text, _ = apply_stop(reply.text, body.get("stop"))
        if body.get("stream"):
            self._stream(body, reply, text)
        elif reply.hold_after is None or self._hold(reply):
            self._send_json(200, self._full(body, text))

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    # -- helpers -----------------------------------------------------------------------

    def _hold(self, reply: Reply) -> bool:
        """Wait for ``reply.hold``; False (connection dropped) if the server closes first."""
        assert reply.hold is not None
        reply.reached.set()
        while not reply.hold.wait(0.05):  # the server thread polls for close()
            if self.fake._closing.is_set():
                self._drop()
                return False
        return True

    def _stall(self) -> None:
        self.fake._closing.wait(60)
        self.close_connection = True

    def _send_error_reply(self, status: int) -> None:
        kind = "rate_limit_exceeded" if status == 429 else "server_error"
        data = json.dumps({"error": {"message": f"fake {status}", "type": kind}}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("retry-after-ms", "10")  # keeps the client's retry wait tiny
        self.end_headers()
        self.wfile.write(data)

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _full(self, body: dict[str, Any], text: str) -> dict[str, Any]:
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        if self.path == CHAT_PATH:
            choice = {"index": 0, "message": {"role": "assistant", "content": text}}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None}
            kind = "text_completion"
        choice["finish_reason"] = "stop"
        return {**_envelope(body, kind), "choices": [choice], "usage": usage}

    def _stream(self, body: dict[str, Any], reply: Reply, text: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chat = self.path == CHAT_PATH
        if chat:
            self._event(_chunk(body, chat, {"role": "assistant", "content": ""}))
        size = max(1, reply.chunk_size)
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        for n, piece in enumerate(pieces):
            if n == reply.hold_after and not self._hold(reply):
                return
            if reply.cut_after is not None and n >= reply.cut_after:
                self._drop()
                return
            if reply.stall_after is not None and n >= reply.stall_after:
                self._stall()
                return
            self._event(_chunk(body, chat, {"content": piece} if chat else piece))
        if reply.hold_after is not None and reply.hold_after >= len(pieces):
            if not self._hold(reply):  # hold after the last delta, before the end
                return
        if reply.cut_after is not None:
            self._drop()
            return
        if reply.stall_after is not None:
            self._stall()
            return
        self._event(_chunk(body, chat, {} if chat else "", finish="stop"))
        if (body.get("stream_options") or {}).get("include_usage"):  # OpenAI's last chunk
            usage = self.fake.stream_usage or {"prompt_tokens": 1, "completion_tokens": 1}
            self._event({**_envelope(body, "chat.completion.chunk"), "choices": [], "usage": usage})
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")  # the chunked-encoding terminator

    def _event(self, payload: dict[str, Any]) -> None:
        self._write_chunk(f"data: {json.dumps(payload)}\n\n".encode())

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Close the connection mid-body, as a crashed server would."""
        self.wfile.flush()
        self.close_connection = True


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "id": "cmpl-fake",
        "object": kind,
        "created": int(time.time()),
        "model": body.get("model", "fake"),
    }


def _chunk(
    body: dict[str, Any], chat: bool, delta: dict[str, Any] | str, finish: str | None = None
) -> dict[str, Any]:
    if chat:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**_envelope(body, "chat.completion.chunk"), "choices": [choice]}
    choice = {"index": 0, "text": delta, "logprobs": None, "finish_reason": finish}
    return {**_envelope(body, "text_completion"), "choices": [choice]}
