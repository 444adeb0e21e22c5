"""Optional extras: a one-line error naming what is missing and the pip command, and the
lazy exports of a package that needs one."""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Collection, Mapping
from typing import Any

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


def lazy_exports(
    package: str,
    exports: Mapping[str, str],
    check: Callable[[], None],
    unchecked: Collection[str] = (),
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `package`: each name of `exports` (name -> submodule)
    is imported from its submodule on first use, after `check` (which raises when the
    package's extra is missing) unless the submodule is one of `unchecked`."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        if exports[name] not in unchecked:
            check()
        return getattr(importlib.import_module(f"{package}.{exports[name]}"), name)

    return __getattr__
