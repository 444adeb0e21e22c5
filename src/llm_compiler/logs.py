"""Log lines with the run and task they belong to, as text or JSON (``serve --log-format``).

The library only logs through :mod:`logging` (loggers under ``llm_compiler``); this module
is what ``llm-compiler serve`` installs on the root logger, and any application may too.
Every line says, where known, the run (``run_id``) and the task (``task_id``) it is
about: a compiler run's steps and tool calls carry them in context variables, and a
record may name them itself (``logger.info(..., extra={"run_id": ...})``). What the
command tells its operator on stdout (the page's URL, the store) goes through :func:`say`,
so with ``--log-format json`` every line on every stream is a JSON object. The access log
(``serve --access-log``) is a record per request with its fields (:data:`ACCESS_FIELDS`).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

#: The run whose steps are running (set while a compiler workflow starts a run; its steps
#: inherit it).
RUN_ID: ContextVar[str | None] = ContextVar("llm_compiler_log_run", default=None)
LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("text", "json")
#: Loggers of libraries that log every request at INFO (httpx: each model call).
_CHATTY = ("httpx", "httpcore")
_TEXT = "%(asctime)s %(levelname)s %(name)s%(ids)s: %(message)s"
#: The logger of the lines the command prints on stdout for its operator.
CONSOLE = "llm_compiler.console"
#: The fields of an access log record, besides the run (JSON lines carry each).
ACCESS_FIELDS = ("method", "path", "status", "duration_ms", "handler_id")
_FIELDS = ("run_id", "task_id", "worker", *ACCESS_FIELDS)


@contextmanager
def run_context(run_id: str) -> Iterator[None]:
    """Name `run_id` on the log lines of what starts inside (asyncio tasks inherit it)."""
    token = RUN_ID.set(run_id)
    try:
        yield
    finally:
        RUN_ID.reset(token)


def ids(record: logging.LogRecord) -> dict[str, Any]:
    """The run and task a record is about, where known."""
    from llm_compiler.tools.calls import idempotency_key

    found: dict[str, Any] = {}
    key = idempotency_key()  # run_id:round:task_id, inside a tool call
    run_id = getattr(record, "run_id", None) or RUN_ID.get()
    task_id = getattr(record, "task_id", None)
    if key is not None and key.count(":") >= 2:
        run, _, task = key.rsplit(":", 2)
        run_id = run_id or run
        task_id = task_id if task_id is not None else task
    if run_id:
        found["run_id"] = str(run_id)
    if task_id is not None:
        found["task_id"] = int(task_id) if str(task_id).isdigit() else str(task_id)
    return found


class ContextFilter(logging.Filter):
    """Puts ``run_id`` / ``task_id`` on each record (and ``ids``, their text form)."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = ids(record)
        for name, value in found.items():
            setattr(record, name, value)
        record.ids = "".join(f" {k}={v}" for k, v in found.items())
        return True


class QuietReconnects(logging.Filter):
    """A driver's reconnect warnings (asyncpg's pool while Postgres restarts) as one line,
    its error's first line, without the traceback: the condition is expected and handled."""

    prefixes = ("asyncpg",)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.name.startswith(self.prefixes):
            error = record.exc_info[1]
            first = str(error).splitlines()[0] if str(error) else ""
            record.msg = f"{record.getMessage()} ({type(error).__name__}: {first})"
            record.args, record.exc_info, record.exc_text = None, None, None
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601), level, logger, message, run_id,
    task_id where known, an access record's fields, and the traceback (``exc``) if any."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in _FIELDS:
            if getattr(record, name, None) is not None:
                line[name] = getattr(record, name)
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def say(message: str) -> None:
    """Tell the operator `message` on stdout: the line as is, or a JSON log line once
    :func:`configure` chose JSON (a line as is before it did)."""
    console = logging.getLogger(CONSOLE)
    if console.handlers:
        console.info(message)
    else:
        print(message, flush=True)  # noqa: T201


def configure(level: str = "info", fmt: str = "text") -> logging.Handler:
    """Log to stderr at `level` in `fmt` (``text`` or ``json``), and send what :func:`say`
    says to stdout in the same format; the stderr handler installed.

    The handler is added to the root logger (remove it to undo).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(QuietReconnects())
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    _console(fmt)
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level.upper())
    quiet = logging.WARNING if level.lower() != "debug" else logging.DEBUG
    for name in _CHATTY:
        logging.getLogger(name).setLevel(quiet)
    return handler


def _console(fmt: str) -> None:
    """The stdout handler of :func:`say` (one, whatever the calls of :func:`configure`)."""
    console = logging.getLogger(CONSOLE)
    out = logging.StreamHandler(sys.stdout)
    out.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter("%(message)s"))
    out.addFilter(ContextFilter())
    console.handlers = [out]
    console.propagate = False
    console.setLevel(logging.INFO)
