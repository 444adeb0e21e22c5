"""Run ``llama_cpp.server`` as a child that never outlives its parent.

The parent holds this process's stdin open and never writes to it. When the parent exits
for any reason (even SIGKILL) the pipe closes, the blocking read below returns, and the
server exits at once.

Requests whose grammar llama.cpp cannot parse are answered 400 before they reach the
server: llama-cpp-python 0.3.36 passes a grammar on unchecked, and the sampler llama.cpp
does not create for it crashes the whole process.

The model keeps the evaluated state of recent prompts (:mod:`.prompt_states`): the
planner's and the joiner's prompts, alternating, no longer evict each other.
``GET /llm_compiler/timings`` answers the recent completions' phases (prompt tokens
evaluated, restored, decoded; milliseconds each).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any

_Scope = dict[str, Any]
_Receive = Callable[[], Awaitable[dict[str, Any]]]
_Send = Callable[[dict[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


def _exit_when_orphaned() -> None:
    # Raw reads: a daemon thread blocked in sys.stdin's buffered reader would abort
    # interpreter shutdown (it holds the buffer's lock).
    while os.read(0, 4096):  # returns b"" at end of file: the parent is gone
        pass
    os._exit(0)


class GrammarCheck:
    """ASGI middleware: 400 for a request whose grammar llama.cpp cannot parse.

    Also 400 (not the server's 500) for a POST body that is not a JSON object.

    Checks ``grammar`` and the grammar made from ``response_format``'s ``schema``, with
    llama.cpp's own parser over the model's vocabulary (loaded without weights).
    """

    def __init__(self, app: _App, model: str) -> None:
        import llama_cpp

        self.app, self._llama = app, llama_cpp
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(model.encode(), params)
        self._vocab = llama_cpp.llama_model_get_vocab(self._model) if self._model else None

    def parses(self, grammar: str) -> bool:
        """Whether llama.cpp can build a sampler for `grammar`."""
        if self._vocab is None:  # no vocabulary to check with: let the server decide
            return True
        llama = self._llama
        sampler = llama.llama_sampler_init_grammar(self._vocab, grammar.encode(), b"root")
        if sampler:
            llama.llama_sampler_free(sampler)
        return bool(sampler)

    def problem(self, body: bytes) -> str | None:
        """Why the request must be refused, or None."""
        try:
            request = json.loads(body)
        except ValueError:  # the server would answer 500
            return "The request body is not valid JSON."
        if not isinstance(request, dict):
            return "The request body must be a JSON object."
        grammar = request.get("grammar")
        if isinstance(grammar, str) and not self.parses(grammar):
            return "grammar: llama.cpp cannot parse this GBNF grammar."
        fmt = request.get("response_format")
        if isinstance(fmt, dict) and isinstance(fmt.get("schema"), dict):
            from llama_cpp.llama_grammar import json_schema_to_gbnf

            try:
                converted = json_schema_to_gbnf(json.dumps(fmt["schema"]))
            except Exception:  # the server falls back to plain JSON
                return None
            if not self.parses(converted):
                return "response_format: this JSON schema converts to a grammar llama.cpp rejects."
        return None

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] == "http" and scope["path"] == TIMINGS_PATH:
            await _respond(send, 200, _last_timings())
            return
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # client gone: nothing to answer
                return
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        problem = self.problem(body)
        if problem:
            await _respond(send, 400, {"detail": problem})
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


#: Where the server answers the last completion's timings.
TIMINGS_PATH = "/llm_compiler/timings"


async def _respond(send: _Send, status: int, content: dict[str, Any]) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(content).encode()})


def _last_timings() -> dict[str, Any]:
    """``recent``: the timings of the last completions, the last one last."""
    from llm_compiler.models.prompt_states import RECENT

    return {"recent": [t.as_dict() for t in RECENT]}


def _keep_prompt_states() -> None:
    """Have ``llama_cpp.server`` load the model as a :func:`.prompt_states.stateful_llama`."""
    import llama_cpp

    from llm_compiler.models.prompt_states import stateful_llama

    llama_cpp.Llama = stateful_llama()  # type: ignore[misc]


def _check_grammars() -> None:
    """Wrap the app ``llama_cpp.server`` creates in GrammarCheck."""
    from llama_cpp.server import app as server_app

    create_app = server_app.create_app

    def create_checked_app(**kwargs: Any) -> Any:
        app = create_app(**kwargs)
        return GrammarCheck(app, str(kwargs["model_settings"][0].model))

    server_app.create_app = create_checked_app  # type: ignore[assignment]


def main() -> None:
    """Start the orphan watch, then ``python -m llama_cpp.server`` with our arguments."""
    threading.Thread(target=_exit_when_orphaned, daemon=True).start()
    _keep_prompt_states()
    _check_grammars()
    from llama_cpp.server.__main__ import main as serve

    sys.argv[0] = "llama_cpp.server"
    serve()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
