"""``python -m llm_compiler.models``: serve the embedded model in the foreground."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from llm_compiler.errors import LLMCompilerError
from llm_compiler.models.gguf import MODEL_NAME
from llm_compiler.models.server import DEFAULT_N_CTX, LocalLLMServer

DEFAULT_PORT = 8088


def export_line(base_url: str) -> str:
    """The shell line that points ``resolve_llm()`` at this server, grammars on."""
    return (
        f"export LLM_COMPILER_API_BASE={base_url} LLM_COMPILER_MODEL={MODEL_NAME} "
        "LLM_COMPILER_CHAT=0 LLM_COMPILER_DECODING=grammar"
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve the embedded model in the foreground until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m llm_compiler.models", description=main.__doc__)
    default_port = int(os.environ.get("LLM_COMPILER_PORT", DEFAULT_PORT))
    parser.add_argument(
        "--port", type=int, default=default_port, help="port on 127.0.0.1 (default: %(default)s)"
    )
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help="context tokens")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (all cores)")
    parser.add_argument("--quiet", action="store_true", help="hide the server's log")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server like Ctrl-C does
    server = LocalLLMServer(
        port=args.port, n_ctx=args.n_ctx, n_threads=args.threads, echo=not args.quiet
    )
    try:
        with server:
            print(f"Serving {MODEL_NAME} at {server.base_url}", flush=True)  # noqa: T201
            print(export_line(server.base_url), flush=True)  # noqa: T201
            return server.wait()
    except KeyboardInterrupt:
        return 0
    except LLMCompilerError as exc:
        print(exc.message, file=sys.stderr)  # noqa: T201
        return 1


if __name__ == "__main__":
    sys.exit(main())
