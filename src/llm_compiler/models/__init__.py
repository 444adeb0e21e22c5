"""The embedded model: llama.cpp's OpenAI-compatible server and the Gemma 3 270M file.

- :mod:`.gguf`: where the model file comes from (the packaged Gemma, or your own GGUF).
- :mod:`.server`: :class:`LocalLLMServer`, the server as a child process.
- :mod:`.cli`: ``python -m llm_compiler.models`` (``make serve-llm``).
"""

from llm_compiler.errors import LocalModelUnavailable, LocalServerError
from llm_compiler.models.gguf import MODEL_NAME, check_installed, model_path
from llm_compiler.models.server import DEFAULT_N_CTX, LocalLLMServer, free_port, local_llm

__all__ = [
    "DEFAULT_N_CTX",
    "MODEL_NAME",
    "LocalLLMServer",
    "LocalModelUnavailable",
    "LocalServerError",
    "check_installed",
    "free_port",
    "local_llm",
    "model_path",
]
