"""``--store`` values: memory, ``sqlite:///path`` or ``postgresql://...``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from llm_compiler.errors import ConfigurationError

Kind = Literal["memory", "sqlite", "postgres"]


@dataclass(frozen=True)
class StoreSpec:
    """A parsed ``--store`` value."""

    kind: Kind
    url: str
    """The database URL (``postgresql://...`` or ``sqlite:///abs/path``); empty for memory."""

    @property
    def durable(self) -> bool:
        """Whether runs survive the process (SQLite or Postgres)."""
        return self.kind != "memory"

    @property
    def shown(self) -> str:
        """The URL without its password, for messages."""
        return redact(self.url) if self.url else "memory"


def parse_store(spec: str | None) -> StoreSpec:
    """Parse ``--store``.

    Raises:
        ConfigurationError: An unknown scheme or an unusable SQLite path.
    """
    if spec in (None, "", "memory"):
        return StoreSpec("memory", "")
    assert spec is not None
    if spec.startswith("sqlite:///"):
        path = Path(spec.removeprefix("sqlite:///")).expanduser().absolute()
        if path.is_dir():
            raise ConfigurationError(f"The SQLite store {path} is a directory, not a file.")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ConfigurationError(f"Cannot create the SQLite store's folder: {e}") from e
        return StoreSpec("sqlite", f"sqlite:///{path}")
    if spec.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(spec)
        if not parts.hostname and "host=" not in parts.query:
            raise ConfigurationError(f"The Postgres store {redact(spec)} names no host.")
        return StoreSpec("postgres", "postgresql://" + spec.split("://", 1)[1])
    raise ConfigurationError(
        f"Unknown store {redact(spec)!r}: use memory, sqlite:///path/to/runs.db or postgresql://..."
    )


def redact(url: str) -> str:
    """`url` with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
