"""A stand-in for llama.cpp's server that dies of SIGSEGV on its first request.

Run as ``python crashing_server.py --port N --mark FILE``: it prints the line the real
server prints when it listens; the first process to see FILE missing creates it and
crashes on its first request, later ones answer ``/v1/completions`` like an OpenAI server.
"""

import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

PORT = int(sys.argv[sys.argv.index("--port") + 1])
MARK = Path(sys.argv[sys.argv.index("--mark") + 1])
CRASH = not MARK.exists()
MARK.touch()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        if CRASH:
            print("ggml_backend_amx_mul_mat: tile config", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)
        body = json.dumps(
            {
                "id": "x",
                "object": "text_completion",
                "created": 0,
                "model": "gemma-3-270m",
                "choices": [{"index": 0, "text": " Paris", "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


server = HTTPServer(("127.0.0.1", PORT), Handler)
print(f"INFO:     Uvicorn running on http://127.0.0.1:{PORT}", flush=True)
server.serve_forever()
