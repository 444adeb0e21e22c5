"""OpenTelemetry metrics of runs, tasks, approvals, model calls and the store.

The engine reports what happens through the ``record_*`` functions below; they do
nothing until :func:`start_metrics` installs a recorder (``llm-compiler serve --metrics``
does, and serves the Prometheus text at ``/metrics``; needs the ``tracing`` extra). Names
follow OpenTelemetry's semantic conventions where they define one (the GenAI client
metrics ``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``, the
attributes ``gen_ai.operation.name``, ``gen_ai.request.model``, ``gen_ai.token.type``,
``gen_ai.tool.name``, ``error.type``); the rest are ``llm_compiler.*``. Counts are this
process's: each worker is one scrape target (``service.instance.id`` is its worker id).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from llm_compiler.errors import ConfigurationError

#: Histogram buckets of durations in seconds (tool calls, model calls, approvals, commits).
SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900)
#: Histogram buckets of token counts per call (the GenAI conventions' advice).
TOKENS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576)
INSTALL_HINT = "pip install 'llm-compiler[tracing]'"
#: The histograms of seconds.
TIMED = (
    "llm_compiler.task.duration",
    "llm_compiler.approval.wait",
    "gen_ai.client.operation.duration",
    "llm_compiler.store.commit.duration",
)


@dataclass
class _Gauges:
    """What the observable gauges read when a scrape collects them."""

    queued: int | None = None
    outage: Callable[[], bool] | None = None
    held: dict[tuple[str, int], tuple[float, str]] = field(default_factory=dict)


class Recorder:
    """The instruments, on a ``MeterProvider`` of the OpenTelemetry SDK."""

    def __init__(self, provider: Any) -> None:
        from opentelemetry.metrics import CallbackOptions, Observation

        self.provider = provider
        self.gauges = _Gauges()
        m = provider.get_meter("llm_compiler")
        self.runs = m.create_counter("llm_compiler.runs", "{run}", "Runs ended, by outcome.")
        self.active = m.create_up_down_counter(
            "llm_compiler.runs.active", "{run}", "Runs this process is running now."
        )
        self.task_duration = m.create_histogram(
            "llm_compiler.task.duration", "s", "Tool calls, by tool, side-effect class, status."
        )
        self.retries = m.create_counter(
            "llm_compiler.task.retries", "{retry}", "Tool call attempts after the first."
        )
        self.unknown = m.create_counter(
            "llm_compiler.task.outcome_unknown",
            "{call}",
            "Calls a crash cut after their start was committed: their outcome is unknown.",
        )
        self.approvals = m.create_counter(
            "llm_compiler.approvals", "{task}", "Tasks held for a human's approval."
        )
        self.approval_wait = m.create_histogram(
            "llm_compiler.approval.wait", "s", "From holding a task to its verdict, by action."
        )
        self.llm_duration = m.create_histogram(
            "gen_ai.client.operation.duration", "s", "Planner and joiner model calls."
        )
        self.tokens = m.create_histogram(
            "gen_ai.client.token.usage", "{token}", "Tokens per model call, input and output."
        )
        self.cost = m.create_counter(
            "llm_compiler.llm.cost", "USD", "Cost of model calls with a known price."
        )
        self.commit = m.create_histogram(
            "llm_compiler.store.commit.duration", "s", "Commits of the durable journal."
        )

        def gauge(value: Callable[[], float | None]) -> Callable[[CallbackOptions], Iterable[Any]]:
            def observe(options: CallbackOptions) -> Iterable[Any]:
                found = value()
                return [] if found is None else [Observation(found)]

            return observe

        g = self.gauges
        m.create_observable_gauge(
            "llm_compiler.runs.queued",
            [gauge(lambda: g.queued)],
            "{run}",
            "Runs waiting in the durable store for a worker.",
        )
        m.create_observable_gauge(
            "llm_compiler.approvals.pending",
            [gauge(lambda: len(g.held))],
            "{task}",
            "Tasks held for approval now, in runs this process runs.",
        )
        m.create_observable_gauge(
            "llm_compiler.store.outage",
            [gauge(lambda: None if g.outage is None else float(g.outage()))],
            "1",
            "1 while the durable store does not answer, else 0.",
        )


_RECORDER: Recorder | None = None


def recorder() -> Recorder | None:
    """The installed recorder (None: metrics are off)."""
    return _RECORDER


def start_metrics(worker: str | None = None) -> Any:
    """Install a recorder; the Prometheus reader's registry (for ``generate_latest``).

    Raises:
        ConfigurationError: The ``tracing`` extra (with the Prometheus exporter) is missing.
    """
    global _RECORDER
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.view import View
        from opentelemetry.sdk.resources import Resource
        from prometheus_client import CollectorRegistry
    except ImportError as e:
        raise ConfigurationError(
            f"Metrics need the tracing extra ({e.name} is missing): {INSTALL_HINT}"
        ) from None
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    resource = {"service.name": "llm-compiler"}
    if worker:
        resource["service.instance.id"] = worker
    views = [View(instrument_name="gen_ai.client.token.usage", aggregation=_buckets(TOKENS))]
    views += [View(instrument_name=name, aggregation=_buckets(SECONDS)) for name in TIMED]
    provider = MeterProvider([reader], Resource.create(resource), views=views)
    _RECORDER = Recorder(provider)
    return registry


def _buckets(bounds: tuple[float, ...]) -> Any:
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation

    return ExplicitBucketHistogramAggregation(bounds)


def stop_metrics() -> None:
    """Remove the recorder."""
    global _RECORDER
    if _RECORDER is not None:
        _RECORDER.provider.shutdown()
    _RECORDER = None


# ---------------------------------------------------------------------- what the engine tells


def count_run(handler: Any, run_id: str) -> None:
    """A run started (or resumed) in this process: count it, and its end."""
    if _RECORDER is None:
        return
    from llm_compiler._upstream import result_task

    result = result_task(handler)
    if result is None:
        return
    _RECORDER.active.add(1)
    result.add_done_callback(lambda done: record_run_ended(run_id, _outcome(done)))


def _outcome(done: Any) -> str:
    if done.cancelled():
        return "cancelled"
    return "failed" if done.exception() is not None else "completed"


def record_run_ended(run_id: str, outcome: str) -> None:
    """A run ended here: ``completed``, ``failed`` or ``cancelled`` (left this process)."""
    if _RECORDER is not None:
        _RECORDER.active.add(-1)
        _RECORDER.runs.add(1, {"llm_compiler.run.outcome": outcome})
        held = _RECORDER.gauges.held
        for key in [k for k in held if k[0] == run_id]:
            del held[key]


def record_task(tool: str, side_effect: str, seconds: float, error: bool, attempts: int) -> None:
    """A tool call ended (all its attempts)."""
    if _RECORDER is None:
        return
    attrs = {
        "gen_ai.tool.name": tool,
        "llm_compiler.tool.side_effect": side_effect,
        "llm_compiler.task.status": "error" if error else "done",
    }
    _RECORDER.task_duration.record(max(0.0, seconds), attrs)
    if attempts > 1:
        _RECORDER.retries.add(attempts - 1, {"gen_ai.tool.name": tool})


def record_outcome_unknown(tool: str) -> None:
    """A call cut by a crash after its start was committed got "outcome unknown"."""
    if _RECORDER is not None:
        _RECORDER.unknown.add(1, {"gen_ai.tool.name": tool})


def record_held(run_id: str, task_id: int, tool: str) -> None:
    """A task is held for approval."""
    if _RECORDER is not None and (run_id, task_id) not in _RECORDER.gauges.held:
        _RECORDER.gauges.held[(run_id, task_id)] = (time.monotonic(), tool)
        _RECORDER.approvals.add(1, {"gen_ai.tool.name": tool})


def record_verdict(run_id: str, task_id: int, action: str) -> None:
    """A held task got its verdict (approve, edit, reject)."""
    if _RECORDER is None:
        return
    found = _RECORDER.gauges.held.pop((run_id, task_id), None)
    if found is not None:
        attrs = {"gen_ai.tool.name": found[1], "llm_compiler.approval.action": action}
        _RECORDER.approval_wait.record(time.monotonic() - found[0], attrs)


def record_llm(call: Any, chat: bool) -> None:
    """A planner or joiner call ended (`call`: its :class:`~.usage.LLMCallUsage`)."""
    if _RECORDER is None:
        return
    attrs = {
        "gen_ai.operation.name": "chat" if chat else "text_completion",
        "gen_ai.request.model": call.model or "unknown",
        "llm_compiler.phase": call.phase,
    }
    _RECORDER.llm_duration.record(call.duration, attrs)
    for kind, count in (("input", call.prompt_tokens), ("output", call.completion_tokens)):
        _RECORDER.tokens.record(count, {**attrs, "gen_ai.token.type": kind})
    if call.cost is not None:
        _RECORDER.cost.add(call.cost, {"gen_ai.request.model": call.model or "unknown"})


def record_commit(seconds: float) -> None:
    """The durable journal committed a batch."""
    if _RECORDER is not None:
        _RECORDER.commit.record(seconds)
