"""The embedded local model (kept as an import path; the code is in :mod:`llm_compiler.models`).

Run ``python -m llm_compiler.local`` to serve it in the foreground (``make serve-llm``).
"""

import sys

from llm_compiler.models import (
    DEFAULT_N_CTX,
    MODEL_NAME,
    LocalLLMServer,
    LocalModelUnavailable,
    LocalServerError,
    check_installed,
    free_port,
    local_llm,
    model_path,
)
from llm_compiler.models.cli import DEFAULT_PORT, main

__all__ = [
    "DEFAULT_N_CTX",
    "DEFAULT_PORT",
    "MODEL_NAME",
    "LocalLLMServer",
    "LocalModelUnavailable",
    "LocalServerError",
    "check_installed",
    "free_port",
    "local_llm",
    "main",
    "model_path",
]

if __name__ == "__main__":
    sys.exit(main())
