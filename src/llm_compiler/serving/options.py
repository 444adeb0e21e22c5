"""Where ``llm-compiler serve`` reads its settings: flags, environment, a TOML file.

Each setting comes from the first of: its command-line flag, its environment variable
(``LLM_COMPILER_<NAME>``), the configuration file (``--config FILE`` or
``LLM_COMPILER_CONFIG``; keys named as the flags, without the dashes in front, at the top
level or in a ``[serve]`` table, both read), its default. ``serve``, ``store migrate`` and
``store prune`` read them alike; a key no setting has, a key set twice, or another table
(whose keys TOML would hide from both) is an error naming it. Lists (hosts, origins,
tokens) are comma-separated in the environment, ``--mcp`` servers one per line; booleans
are ``1/true/yes/on`` or ``0/false/no/off``.

No secret needs the command line (where ``ps`` shows it): the token comes from
``LLM_COMPILER_TOKEN``, several (for rotation) from ``LLM_COMPILER_TOKENS`` or a token
file; a Postgres password from the store URL in ``LLM_COMPILER_STORE`` or the file, or
from libpq's own ``PGPASSWORD`` / ``PGPASSFILE`` (asyncpg reads them).
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llm_compiler.errors import ConfigurationError

PREFIX = "LLM_COMPILER_"
CONFIG_ENV = PREFIX + "CONFIG"
#: The table a file may hold its settings in (beside the top-level keys).
TABLE = "serve"
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Setting:
    """One ``serve`` setting: its flag's dest, default, how to read a text, list or not."""

    dest: str
    default: Any = None
    parse: Callable[[str], Any] = str
    kind: str = "one"  # one, list (comma-separated), lines (one per line), flag (bool)
    env: str = ""

    @property
    def variable(self) -> str:
        """Its environment variable."""
        return self.env or PREFIX + self.dest.upper()

    @property
    def key(self) -> str:
        """Its key in the configuration file (the flag's name)."""
        return self.dest.replace("_", "-")


def boolean(text: str) -> bool:
    """``1/true/yes/on`` or ``0/false/no/off`` (any case)."""
    value = text.strip().lower()
    if value in _TRUE | _FALSE:
        return value in _TRUE
    raise ValueError(f"expected true or false, got {text!r}")


def read_config(path: str) -> dict[str, Any]:
    """The settings of a TOML file: its top-level keys and its ``[serve]`` table's, merged
    (dashed or underscored names alike).

    Raises:
        ConfigurationError: The file cannot be read or is not TOML, another table, or a
            key set twice.
    """
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ConfigurationError(f"Cannot read the configuration file {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"The configuration file {path} is not TOML: {e}") from None
    serve = data.pop(TABLE, {})
    if not isinstance(serve, dict):
        raise ConfigurationError(f"{path}: {TABLE} must be the [{TABLE}] table of settings.")
    merged: dict[str, Any] = {}
    for table, keys in (("", data), (TABLE, serve)):
        for key, value in keys.items():
            name = str(key).replace("-", "_")
            if isinstance(value, dict):
                raise ConfigurationError(
                    f"{path}: the table [{'.'.join(filter(None, (table, key)))}] hides its "
                    f"keys from every setting; write them at the top level or under [{TABLE}]."
                )
            if name in merged:
                raise ConfigurationError(
                    f"{path}: {name.replace('_', '-')} is set twice; keep one."
                )
            merged[name] = value
    return merged


def _unknown(path: str, keys: set[str], known: set[str]) -> ConfigurationError:
    """The error naming the first unknown key of `keys` and the setting it may mean."""
    key = sorted(keys)[0]
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {close[0].replace('_', '-')}? " if close else ""
    return ConfigurationError(
        f"{path}: unknown setting {key.replace('_', '-')} ({hint}keys are the options of "
        "`llm-compiler serve --help` without their dashes)."
    )


def resolve(
    args: argparse.Namespace,
    settings: tuple[Setting, ...],
    environ: Mapping[str, str] | None = None,
    known: tuple[Setting, ...] | None = None,
) -> argparse.Namespace:
    """Fill every setting `args` leaves None from the environment, the file, the default;
    ``args.origins`` says where each came from (a flag, a variable, the file, ``default``).

    Args:
        known: The settings a file may hold (default: `settings`); the others are read
            by another command.

    Raises:
        ConfigurationError: An unknown key in the file, or a value of the wrong type
            (named with where it came from).
    """
    environ = os.environ if environ is None else environ
    path = getattr(args, "config", None) or environ.get(CONFIG_ENV)
    file = read_config(path) if path else {}
    names = {s.dest for s in known or settings}
    if set(file) - names:
        raise _unknown(str(path), set(file) - names, names)
    origins: dict[str, str] = getattr(args, "origins", {})
    for setting in settings:
        given = getattr(args, setting.dest, None)
        if given is not None and given != []:
            origins[setting.dest] = f"--{setting.key}"
            continue
        if setting.variable in environ and environ[setting.variable].strip():
            value = _from_text(setting, environ[setting.variable], setting.variable)
            origins[setting.dest] = setting.variable
        elif setting.dest in file:
            value = _from_file(setting, file[setting.dest], f"{path}: {setting.key}")
            origins[setting.dest] = str(path)
        else:
            value = list(setting.default) if setting.kind in ("list", "lines") else setting.default
            origins[setting.dest] = "default"
        setattr(args, setting.dest, value)
    args.origins = origins
    return args


def _from_text(setting: Setting, text: str, source: str) -> Any:
    if setting.kind == "list":
        return [_parsed(setting, t.strip(), source) for t in text.split(",") if t.strip()]
    if setting.kind == "lines":
        return [_parsed(setting, t.strip(), source) for t in text.splitlines() if t.strip()]
    if setting.kind == "flag":
        return _parsed(setting, text, source, boolean)
    return _parsed(setting, text.strip(), source)


def _from_file(setting: Setting, value: Any, source: str) -> Any:
    if setting.kind in ("list", "lines"):
        items = value if isinstance(value, list) else [value]
        return [_parsed(setting, str(v), source) for v in items]
    if setting.kind == "flag":
        if not isinstance(value, bool):
            raise ConfigurationError(f"{source}: expected true or false, got {value!r}.")
        return value
    if isinstance(value, (dict, list)):
        raise ConfigurationError(f"{source}: expected one value, got {value!r}.")
    return _parsed(setting, str(value), source)


def _parsed(
    setting: Setting, text: str, source: str, parse: Callable[[str], Any] | None = None
) -> Any:
    try:
        return (parse or setting.parse)(text)
    except (ValueError, argparse.ArgumentTypeError) as e:
        raise ConfigurationError(f"{source}: {e}") from None
