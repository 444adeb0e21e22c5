"""Optional extras: a one-line error naming what is missing and the pip command."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

from llm_compiler.errors import ConfigurationError


def require(what: str, extra: str, needed: Mapping[str, str]) -> None:
    """Raise a :class:`ConfigurationError` if a module of `needed` (module -> distribution)
    cannot be imported, e.g. "Serving needs ag-ui-protocol: pip install 'llm-compiler[serve]'".
    """
    missing = [dist for module, dist in needed.items() if _find(module) is None]
    if missing:
        raise ConfigurationError(
            f"{what} {', '.join(missing)}: pip install 'llm-compiler[{extra}]'"
        )


def _find(module: str) -> object:
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:  # a parent package is missing
        return None
