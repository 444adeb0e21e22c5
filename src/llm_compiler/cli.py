"""The ``llm-compiler`` command: ``llm-compiler serve`` runs the HTTP server and live page."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from workflows import Workflow

from llm_compiler.errors import ConfigurationError, LLMCompilerError
from llm_compiler.logs import FORMATS, LEVELS, say
from llm_compiler.logs import configure as configure_logs
from llm_compiler.serving.options import PREFIX, Setting, resolve
from llm_compiler.tracing.metrics import stop_metrics
from llm_compiler.tracing.otel import start_export
from llm_compiler.tracing.prices import PRICES_ENV, load_prices
from llm_compiler.tuning import tune_for_many_runs

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

    from llm_compiler.engine.cache import CacheStore
    from llm_compiler.serving.app import ServedApp
    from llm_compiler.serving.security import SecurityPolicy
    from llm_compiler.tools.policy import ToolPolicy

logger = logging.getLogger(__name__)

COMPILER, TEAM = "compiler", "team"
#: Seconds an MCP tool call may take when serving with --mcp (--mcp-tool-timeout).
MCP_TOOL_TIMEOUT = 30.0
#: Bind addresses meaning "every interface" (not a name a request can carry).
_WILDCARDS = ("0.0.0.0", "::")


def load_workflows(spec: str) -> dict[str, Workflow]:
    """Workflows from ``module:attr``: a workflow, a team, a dict of them, or a factory
    (`module` found in the working directory too, as ``uvicorn`` finds an app).

    An ``LLMCompilerWorkflow`` is served as ``compiler``, any other workflow (e.g. an
    ``AgentWorkflow`` team of ``LLMCompilerAgent``) as ``team``.

    Raises:
        ConfigurationError: The spec is malformed, cannot be imported or is no workflow.
    """
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"--workflow takes module:attr, got {spec!r}.")
    if os.getcwd() not in sys.path:  # as uvicorn: modules of the working directory import
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as e:
        raise ConfigurationError(f"Cannot import {module_name!r}: {e}") from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise ConfigurationError(f"{module_name!r} has no attribute {attr!r}.")
        target = getattr(target, part)
    if callable(target) and not isinstance(target, Workflow):
        target = target()
    if isinstance(target, Workflow):
        target = {COMPILER if isinstance(target, LLMCompilerWorkflow) else TEAM: target}
    if not isinstance(target, Mapping) or not all(isinstance(w, Workflow) for w in target.values()):
        raise ConfigurationError(f"{spec} is not a workflow, a dict of workflows or a factory.")
    return dict(target)


@asynccontextmanager
async def demo_workflows(
    prompt_cache: bool = False,
    mcp: Sequence[str] = (),
    mcp_tool_timeout: float = MCP_TOOL_TIMEOUT,
) -> AsyncIterator[tuple[dict[str, Workflow], str]]:
    """The demo tools, or the tools of the `mcp` servers, on the model ``resolve_llm()`` picks.

    `mcp` holds command lines (stdio) and URLs (streamable HTTP); their sessions are
    opened before the model starts (a server that cannot start fails fast) and closed
    when the context ends. A call of their tools gets `mcp_tool_timeout` seconds.

    `prompt_cache` gives the embedded model llama-cpp-python's RAM prompt cache. Off by
    default: on an idle 2-core machine it made a later question's first task slower
    (median 5.97 s vs 2.14 s, ``benchmarks.first_task``): saving and restoring state
    costs more than re-reading the prompt, which llama.cpp partly reuses by itself.
    """
    from llm_compiler.engine.workflow import LLMCompilerWorkflow
    from llm_compiler.models.resolve import embedded_llm, resolve_llm
    from llm_compiler.models.server import LocalLLMServer
    from llm_compiler.serving.kv import PROMPT_CACHE_ARGS

    resolved = await asyncio.to_thread(resolve_llm)  # it may ask a server what it takes
    async with AsyncExitStack() as stack:
        options = await _tool_options(stack, mcp, mcp_tool_timeout)
        if resolved.source == "local":
            server = LocalLLMServer(extra_args=PROMPT_CACHE_ARGS if prompt_cache else None)
            # Restarted by the next run if it dies; started now so it is warm.
            embedded = await stack.enter_async_context(embedded_llm(server))
            await asyncio.to_thread(embedded.ensure_started)  # type: ignore[attr-defined]
            llm: LLM = embedded
        else:
            llm = await stack.enter_async_context(resolved)
        workflow = LLMCompilerWorkflow(llm=llm, max_replans=1, timeout=600, **options)
        yield {COMPILER: workflow}, resolved.description


async def _tool_options(
    stack: AsyncExitStack, mcp: Sequence[str], mcp_tool_timeout: float = MCP_TOOL_TIMEOUT
) -> dict[str, Any]:
    """The served compiler's tools: the `mcp` servers' (open in `stack`), else the demo's."""
    from llm_compiler.demo import tools as demo_tools
    from llm_compiler.tools import tools_from_mcp

    if mcp:
        # MCP tools may be remote and slow; the demo's few-shot examples name demo tools.
        return {
            "tools": list(await stack.enter_async_context(tools_from_mcp(*mcp))),
            "tool_timeout": mcp_tool_timeout,
        }
    # As in `make demo`: lookups take as long as a web request would, so the overlap shows.
    demo_tools.LATENCY = float(os.environ.get("DEMO_TOOL_LATENCY", "1.5"))
    return {
        "tools": demo_tools.TOOLS,
        "tool_timeout": 10,
        "planner_examples": demo_tools.PLANNER_EXAMPLES,
        "joiner_examples": demo_tools.JOINER_EXAMPLES,
    }


async def run_server(args: argparse.Namespace) -> None:
    """Build the app for `args` and serve it until interrupted (the collector tuned
    first: :func:`~llm_compiler.tuning.tune_for_many_runs`)."""
    tune_for_many_runs()
    if args.prices:  # checked now; every workflow built below reads it (see tracing.prices)
        load_prices(args.prices)
        os.environ[PRICES_ENV] = args.prices
    stop_export = start_export(args.otlp_endpoint)
    try:
        await _serve(args)
    finally:
        if stop_export is not None:
            await asyncio.to_thread(stop_export)  # flushes the last spans
        stop_metrics()


async def _serve(args: argparse.Namespace) -> None:
    from llm_compiler.durable.spec import parse_store
    from llm_compiler.serving import build_app, serve
    from llm_compiler.serving.server import check_exposure

    if args.workflow and args.mcp:
        raise ConfigurationError(
            "--mcp serves the compiler over MCP tools; --workflow brings its own."
        )
    if args.mcp_tool_timeout is not None and not args.mcp:
        raise ConfigurationError("--mcp-tool-timeout is the timeout of --mcp tools; add --mcp.")
    policy = security_policy(args)
    if not policy.insecure:  # before the model starts: fail in a second, not in a minute
        check_exposure(policy, args.host)  # (serve() checks again, and warns if insecure)
    if args.host in _WILDCARDS and not args.allow_host:
        say(
            f"Note: on {args.host}, requests must name this server by a loopback name; add "
            "--allow-host NAME for each name or address other machines use to reach it."
        )
    _reload_tokens_on_sighup(policy)
    announce = partial(_announce, policy.token)
    how = {
        "log_level": args.log_level,
        "access_log": args.access_log,
        "log_config": None,
        "drain_grace": args.drain_grace or None,
    }
    with _naming_the_store(args):
        spec = parse_store(args.store)
    durable = None
    if spec.durable:
        from llm_compiler.durable import open_durable
        from llm_compiler.durable.backend import exit_on_fatal

        with _naming_the_store(args):
            durable = await open_durable(
                spec,
                idle_release=args.idle_release,
                outage_limit=args.outage_limit,
                on_fatal=exit_on_fatal,
                retain=args.retain,
            )
        say(
            f"Runs are kept in {spec.shown}, from {_origin(args, 'store')} "
            f"(worker {durable.worker})."
        )
    else:
        logger.info(
            "Runs are kept in memory (%s): they end with this process; a durable store "
            "comes from --store, LLM_COMPILER_STORE or store in the --config file.",
            _origin(args, "store"),
        )
    options: dict[str, Any] = {"durable": durable, "max_runs": args.max_runs, "policy": policy}
    tool_policies = read_tool_policies(args.tool_policies)
    config = {} if args.result_cache else {"cache_results": False}
    config |= {"cache_plans": True} if args.plan_cache else {}
    config |= {"speculate": True} if args.speculate else {}
    results = _shared_results(durable) if args.result_cache else None
    if args.workflow:
        workflows = apply_tool_policies(load_workflows(args.workflow), tool_policies, **config)
        share_result_cache(workflows, results)
        model = ", ".join(sorted({_model_name(w) for w in workflows.values()}))
        served = _operated(build_app(workflows, info={"model": model}, **options), args)
        await serve(served, args.host, args.port, on_ready=announce, **how)
        return
    say("Starting the model…")
    timeout = args.mcp_tool_timeout or MCP_TOOL_TIMEOUT
    demo = demo_workflows(args.prompt_cache, args.mcp, timeout)
    async with demo as (workflows, model):
        workflows = apply_tool_policies(workflows, tool_policies, **config)
        share_result_cache(workflows, results)
        served = _operated(build_app(workflows, info={"model": model}, **options), args)
        await serve(served, args.host, args.port, on_ready=announce, **how)


def _origin(args: argparse.Namespace, dest: str) -> str:
    """Where setting `dest` of `args` came from, in words."""
    origin = str(getattr(args, "origins", {}).get(dest, "default"))
    if origin == "default":
        return "the default"
    if origin.startswith("--"):
        return origin
    return f"${origin}" if origin.startswith(PREFIX) else f"the configuration file {origin}"


@contextmanager
def _naming_the_store(args: argparse.Namespace) -> Iterator[None]:
    """A store's configuration error, completed with where the store setting came from."""
    try:
        yield
    except ConfigurationError as e:
        raise ConfigurationError(
            f"{e.message} (the store is set by {_origin(args, 'store')})"
        ) from e


def _shared_results(durable: Any) -> CacheStore | None:
    """The result cache every worker of `durable`'s store shares (None: no durable store)."""
    if durable is None:
        return None
    from llm_compiler.durable.result_cache import shared_cache

    return shared_cache(durable.spec, durable.journal.driver)


def share_result_cache(workflows: Mapping[str, Workflow], store: CacheStore | None) -> None:
    """Each compiler of `workflows` without a ``cache_namespace`` gets its served name as
    one (so every worker serving it shares its results, and no other compiler's); each
    that keeps results in the process's default store keeps them in `store` instead (one
    made with a store of its own keeps that)."""
    from llm_compiler.engine.cache import PROCESS_CACHE
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    for name, workflow in workflows.items():
        if not isinstance(workflow, LLMCompilerWorkflow):
            continue
        if workflow.config.cache_namespace is None:
            namespace = {"cache_namespace": f"served:{name}"}
            workflow.config = workflow.config.model_copy(update=namespace)
        if store is not None and workflow.result_cache is PROCESS_CACHE:
            workflow.result_cache = store


def _operated(served: ServedApp, args: argparse.Namespace) -> ServedApp:
    """`served`, with metrics if `args` asks for them."""
    if args.metrics and served.ops is not None:
        served.ops.serve_metrics()
    return served


def _reload_tokens_on_sighup(policy: SecurityPolicy) -> None:
    """With a token file, SIGHUP reads it again (a bad file keeps the tokens in use)."""
    accepted = policy.accepted
    if accepted is None or accepted.path is None:
        return

    def reload() -> None:
        try:
            accepted.reload()
        except ConfigurationError as e:
            logger.error("Kept the tokens in use: %s", e.message)
            return
        logger.info("Read the token file again: %d tokens accepted.", len(accepted.current))

    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, reload)


def read_tool_policies(path: str | None) -> dict[str, ToolPolicy]:
    """The tool policies of a JSON file ``{"tool": {"side_effect": "pure", ...}}``."""
    from llm_compiler.tools.policy import load_policies

    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise ConfigurationError(f"Cannot read tool policies from {path}: {e}") from None
    return load_policies(data)


def apply_tool_policies(
    workflows: dict[str, Workflow], policies: Mapping[str, ToolPolicy], **config: Any
) -> dict[str, Workflow]:
    """`workflows`, each compiler given `policies` (over the ones it has by name) and the
    ``CompilerConfig`` fields `config`."""
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    for workflow in workflows.values() if policies or config else ():
        if isinstance(workflow, LLMCompilerWorkflow):
            merged = {**(workflow.config.tool_policies or {}), **policies}
            update = {**config, "tool_policies": merged or workflow.config.tool_policies}
            workflow.config = workflow.config.model_copy(update=update)
    return workflows


def security_policy(args: argparse.Namespace) -> SecurityPolicy:
    """The policy the serve options ask for (a specific bind address is an allowed host)."""
    from llm_compiler.serving.security import SecurityPolicy

    hosts = list(args.allow_host)
    if args.host not in _WILDCARDS:
        hosts.append(args.host)
    return SecurityPolicy.build(
        args.token or None,
        args.allow_origin,
        hosts,
        args.insecure,
        tokens=getattr(args, "tokens", ()),
        token_file=getattr(args, "token_file", None),
    )


def _model_name(workflow: Workflow) -> str:
    """The model a workflow's LLM names (a compiler's planner and joiner model), if any."""
    llm = getattr(workflow, "llm", None)
    try:
        return str(llm.metadata.model_name) if llm is not None else type(workflow).__name__
    except Exception:  # an LLM without metadata still serves; the page shows its class
        return type(llm).__name__


def _announce(token: str | None, url: str) -> None:
    """Print the page's URL, never the token (stdout is often a log): say how to hand the
    page the token instead."""
    for wildcard in ("//0.0.0.0:", "//[::]:"):  # a browser reaches those by a loopback name
        url = url.replace(wildcard, "//127.0.0.1:")
    say(f"Serving the live plan page at {url}  (Ctrl-C to stop)")
    if token:
        say(
            f"The API needs the server's token (LLM_COMPILER_TOKEN, or the token file): open "
            f"the page as {url}#token=<token>."
        )


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    top = argparse.ArgumentParser(prog="llm-compiler", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="serve workflows over HTTP with a live plan page",
        description="Every option can also come from its environment variable (in brackets) "
        "or a TOML file (--config); a flag wins over the environment, which wins over the "
        "file. See docs/operations.md.",
    )
    serve.add_argument(
        "--config",
        metavar="FILE",
        help="a TOML file of these settings, keys named as the options (host = ..., "
        "max-runs = 8); an option or its environment variable wins over it",
    )
    serve.add_argument("--host", help="bind address (default: 127.0.0.1)")
    serve.add_argument("--port", type=_port, help="TCP port (default: 8000)")
    serve.add_argument(
        "--workflow",
        metavar="MODULE:ATTR",
        help="your LLMCompilerWorkflow, LLMCompilerAgent team, dict of them or a factory; "
        "the module is found in the working directory too "
        "(default: the demo tools on the model resolve_llm() picks)",
    )
    serve.add_argument(
        "--mcp",
        action="append",
        metavar="COMMAND_OR_URL",
        help="serve the compiler over the tools of an MCP server: a command line started "
        'over stdio ("python -m my_server") or a streamable-HTTP URL; repeatable',
    )
    serve.add_argument(
        "--mcp-tool-timeout",
        type=_positive_seconds,
        metavar="SECONDS",
        help="how long one call of an --mcp tool may take; a timeout is an error "
        f"observation and cancels the call (default: {MCP_TOOL_TIMEOUT:g})",
    )
    serve.add_argument(
        "--store",
        help="where runs are kept: memory, sqlite:///path.db (durable, one worker) or "
        "postgresql://... (durable, shared by every worker started on it; keep its password "
        "off the command line: PGPASSWORD, or the URL in LLM_COMPILER_STORE) (default: memory)",
    )
    serve.add_argument(
        "--idle-release",
        type=_positive_seconds,
        metavar="SECONDS",
        help="with a durable store, a run waiting for input (a plan approval) leaves memory "
        "after this long; the next event loads it on any worker (default: 30)",
    )
    serve.add_argument(
        "--outage-limit",
        type=_positive_seconds,
        metavar="SECONDS",
        help="with a durable store, how long a worker rides out an unreachable database "
        "(reconnecting with backoff; /health says degraded) before it stops (default: 120)",
    )
    serve.add_argument(
        "--retain",
        type=_age,
        metavar="AGE",
        help="with a durable store, delete finished runs this long after they finished "
        "(e.g. 7d, 12h; checked at start and every quarter of AGE, at most hourly) "
        "(default: keep them)",
    )
    serve.add_argument(
        "--max-runs",
        type=_positive,
        metavar="K",
        help="runs this worker holds at once; the rest wait (in the database for any worker "
        "with a durable store) (default: no cap)",
    )
    serve.add_argument(
        "--token",
        help="bearer token every API request and event stream must carry (default: none on "
        "loopback); better from LLM_COMPILER_TOKEN, where ps does not show it. Open the page "
        "as URL#token=TOKEN: it keeps the token for the tab",
    )
    serve.add_argument(
        "--token-file",
        metavar="FILE",
        help="accept every token in FILE (one a line, # comments), read again on SIGHUP: "
        "add a new token, roll the clients over, remove the old one, no restart",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        metavar="URL",
        help="let web pages of this origin call the API (repeatable; default: only the "
        "server's own page)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        metavar="NAME",
        help="accept requests naming this host (repeatable; loopback names and the bind "
        "address always; * for any, e.g. behind a proxy that checks it)",
    )
    serve.add_argument(
        "--insecure",
        action=argparse.BooleanOptionalAction,
        help="serve beyond loopback without a token (anyone who can reach it runs tools)",
    )
    serve.add_argument(
        "--tool-policies",
        metavar="FILE",
        help='tool policies by tool name, a JSON file {"pay": {"side_effect": "at_most_once", '
        '"requires_approval": true}, "lookup": {"side_effect": "pure", "retry": {"attempts": '
        "3}}} (see ToolPolicy); they replace the policies the tools declare",
    )
    serve.add_argument(
        "--result-cache",
        action=argparse.BooleanOptionalAction,
        help="serve a pure tool's repeated call from the result cache (with a durable "
        "--store, the store's, shared by every worker); --no-result-cache calls every tool "
        "again (see docs/caching.md) (default: on)",
    )
    serve.add_argument(
        "--plan-cache",
        action=argparse.BooleanOptionalAction,
        help="plan a question of a shape answered before from that answer's plan, filled "
        "with the question's values, without a planner call (see docs/caching.md) "
        "(default: off)",
    )
    serve.add_argument(
        "--speculate",
        action=argparse.BooleanOptionalAction,
        help="while the planner writes, start the pure calls a plan of a shape answered "
        "before predicts (see docs/caching.md) (default: off)",
    )
    serve.add_argument(
        "--prompt-cache",
        action=argparse.BooleanOptionalAction,
        help="give the embedded model llama.cpp's RAM prompt cache (measured slower on "
        "small CPUs; see docs/serving.md)",
    )
    serve.add_argument(
        "--otlp-endpoint",
        metavar="URL",
        help="export traces over OTLP/HTTP to URL (e.g. http://127.0.0.1:6006 for Phoenix; "
        "default: the OTEL_EXPORTER_OTLP_ENDPOINT environment variable, else no export; "
        "needs the tracing extra)",
    )
    serve.add_argument(
        "--prices",
        metavar="FILE",
        help='model prices for the runs\' cost, a JSON file {"model": {"input": USD per '
        'million tokens, "output": ..., "cached_input": ...}} (default: the '
        "LLM_COMPILER_PRICES environment variable; OpenAI's models are built in)",
    )
    _operations_options(serve)
    for action in serve._actions:  # each option says its environment variable
        setting = next((s for s in SERVE_SETTINGS if s.dest == action.dest), None)
        if setting is not None and action.help:
            action.help += f" [${setting.variable}]"
    _store_commands(commands)
    return top


def _store_commands(commands: Any) -> None:
    store = commands.add_parser("store", help="maintain a durable store")
    actions = store.add_subparsers(dest="action", required=True)
    migrate = actions.add_parser(
        "migrate", help="create or upgrade the store's tables (workers also do it at start)"
    )
    prune = actions.add_parser("prune", help="delete finished runs older than an age")
    for action in (migrate, prune):
        action.add_argument(
            "--store",
            help="sqlite:///path.db or postgresql://... (default: LLM_COMPILER_STORE, else "
            "store in the --config file, as for serve)",
        )
        action.add_argument(
            "--config",
            metavar="FILE",
            help="the TOML file of the serve settings, for its store [$LLM_COMPILER_CONFIG]",
        )
    prune.add_argument(
        "--older-than", type=_age, required=True, metavar="AGE", help="e.g. 7d, 12h, 30m"
    )


async def run_store(args: argparse.Namespace) -> None:
    """``llm-compiler store migrate|prune``."""
    from llm_compiler.durable import admin

    with _naming_the_store(args):
        if args.action == "migrate":
            before, after = await admin.migrate(args.store)
            say(f"Schema version {after} (was {before or 'none'}).")
        else:
            gone = await admin.prune_store(args.store, args.older_than)
            say(f"Deleted {gone} finished run(s).")


def _age(text: str) -> float:
    from llm_compiler.durable.admin import parse_age

    try:
        return parse_age(text)
    except ConfigurationError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _operations_options(serve: argparse.ArgumentParser) -> None:
    """Logs, metrics and shutdown."""
    serve.add_argument(
        "--log-level", type=_one_of(LEVELS), help="debug, info, warning or error (default: info)"
    )
    serve.add_argument(
        "--log-format",
        type=_one_of(FORMATS),
        help="text, or json: one object a line with time, level, logger, message, run_id "
        "and task_id (default: text)",
    )
    serve.add_argument(
        "--drain-grace",
        type=_seconds,
        metavar="SECONDS",
        help="on SIGTERM or Ctrl-C, stop taking runs and let tool calls in flight finish for "
        "up to this long before handing the runs over (calls not started yet start on the "
        "worker that takes the run); a second signal hands over at once; 0: no drain "
        "(default: 30)",
    )
    serve.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        help="serve OpenTelemetry metrics at /metrics in Prometheus text (behind the token; "
        "needs the tracing extra) (default: off)",
    )
    serve.add_argument(
        "--access-log",
        action=argparse.BooleanOptionalAction,
        help="log every HTTP request at info (default: off)",
    )


def _one_of(choices: Sequence[str]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text.lower() not in choices:
            raise argparse.ArgumentTypeError(f"expected one of {', '.join(choices)}, got {text!r}")
        return text.lower()

    return parse


def _number(
    cast: Callable[[str], float], ok: Callable[[float], bool], expected: str
) -> Callable[[str], Any]:
    """A parser of numbers `cast` reads and `ok` accepts (else: "expected `expected`")."""

    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            value = float("nan")
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_port = _number(int, lambda v: 0 <= v <= 65535, "a port from 0 to 65535")
_positive = _number(int, lambda v: v >= 1, "a whole number of at least 1")
_seconds = _number(float, lambda v: 0 <= v < float("inf"), "a number of seconds, 0 or more")
_positive_seconds = _number(float, lambda v: 0 < v < float("inf"), "a number of seconds above 0")


#: Every ``serve`` setting: flag > environment (``LLM_COMPILER_<NAME>``) > --config file > default.
SERVE_SETTINGS = (
    Setting("host", "127.0.0.1"),
    Setting("port", 8000, _port),
    Setting("workflow"),
    Setting("mcp", (), kind="lines"),
    Setting("mcp_tool_timeout", None, _positive_seconds),
    Setting("store", "memory"),
    Setting("idle_release", 30.0, _positive_seconds),
    Setting("outage_limit", 120.0, _positive_seconds),
    Setting("max_runs", None, _positive),
    Setting("token"),
    Setting("tokens", (), kind="list"),
    Setting("token_file"),
    Setting("allow_origin", (), kind="list"),
    Setting("allow_host", (), kind="list"),
    Setting("insecure", False, kind="flag"),
    Setting("tool_policies"),
    Setting("prompt_cache", False, kind="flag"),
    Setting("result_cache", True, kind="flag"),
    Setting("plan_cache", False, kind="flag"),
    Setting("speculate", False, kind="flag"),
    Setting("otlp_endpoint", env="LLM_COMPILER_OTLP_ENDPOINT"),
    Setting("prices"),
    Setting("log_level", "info", _one_of(LEVELS)),
    Setting("log_format", "text", _one_of(FORMATS)),
    Setting("access_log", False, kind="flag"),
    Setting("metrics", False, kind="flag"),
    Setting("drain_grace", 30.0, _seconds),
    Setting("retain", None, _age),
)

#: What ``store migrate`` and ``store prune`` read the way ``serve`` does.
STORE_SETTINGS = tuple(s for s in SERVE_SETTINGS if s.dest == "store")


def parse(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Any:
    """The command line, each setting it leaves out filled from the environment, the
    configuration file, or its default (see :mod:`llm_compiler.serving.options`).

    Raises:
        ConfigurationError: A bad value in the environment or the file.
    """
    args = parser().parse_args(argv)
    if args.command == "serve":
        resolve(args, SERVE_SETTINGS, environ)
    else:
        resolve(args, STORE_SETTINGS, environ, known=SERVE_SETTINGS)
        if args.store in (None, "", "memory"):
            raise ConfigurationError(
                f"store {args.action} needs a durable store: give --store sqlite:///path.db "
                "or postgresql://..., LLM_COMPILER_STORE, or store in the --config file."
            )
    return args


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``llm-compiler`` console script."""
    try:
        args = parse(argv)
    except ConfigurationError as e:
        print(f"error: {e.message}", file=sys.stderr)  # noqa: T201
        return 2
    handler = configure_logs(
        getattr(args, "log_level", "info"), getattr(args, "log_format", "text")
    )
    try:
        return _run(args)
    finally:
        logging.getLogger().removeHandler(handler)


def _run(args: argparse.Namespace) -> int:
    """Serve `args` until interrupted; the exit status."""
    # uvicorn re-raises a caught SIGTERM after its shutdown; by default that would end the
    # process before the embedded model server is stopped. As Ctrl-C, it unwinds instead.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        asyncio.run(run_store(args) if args.command == "store" else run_server(args))
    except KeyboardInterrupt:
        return 0
    except (LLMCompilerError, OSError) as e:
        print(f"error: {getattr(e, 'message', None) or e}", file=sys.stderr)  # noqa: T201
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0


if __name__ == "__main__":
    sys.exit(main())
