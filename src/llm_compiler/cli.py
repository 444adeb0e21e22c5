"""The ``llm-compiler`` command: ``llm-compiler serve`` runs the HTTP server and live page."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from workflows import Workflow

from llm_compiler.errors import ConfigurationError, LLMCompilerError
from llm_compiler.tracing.otel import start_export
from llm_compiler.tracing.prices import PRICES_ENV, load_prices

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

    from llm_compiler.serving.security import SecurityPolicy
    from llm_compiler.tools.policy import ToolPolicy

COMPILER, TEAM = "compiler", "team"
#: Seconds an MCP tool call may take when serving with --mcp (--mcp-tool-timeout).
MCP_TOOL_TIMEOUT = 30.0
#: Bind addresses meaning "every interface" (not a name a request can carry).
_WILDCARDS = ("0.0.0.0", "::")


def load_workflows(spec: str) -> dict[str, Workflow]:
    """Workflows from ``module:attr``: a workflow, a team, a dict of them, or a factory.

    An ``LLMCompilerWorkflow`` is served as ``compiler``, any other workflow (e.g. an
    ``AgentWorkflow`` team of ``LLMCompilerAgent``) as ``team``.

    Raises:
        ConfigurationError: The spec is malformed, cannot be imported or is no workflow.
    """
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigurationError(f"--workflow takes module:attr, got {spec!r}.")
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
    """Build the app for `args` and serve it until interrupted."""
    if args.prices:  # checked now; every workflow built below reads it (see tracing.prices)
        load_prices(args.prices)
        os.environ[PRICES_ENV] = args.prices
    stop_export = start_export(args.otlp_endpoint)
    try:
        await _serve(args)
    finally:
        if stop_export is not None:
            await asyncio.to_thread(stop_export)  # flushes the last spans


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
        print(  # noqa: T201
            f"Note: on {args.host}, requests must name this server by a loopback name; add "
            "--allow-host NAME for each name or address other machines use to reach it."
        )
    announce = partial(_announce, policy.token)
    spec = parse_store(args.store)
    durable = None
    if spec.durable:
        from llm_compiler.durable import open_durable

        durable = await open_durable(
            spec, idle_release=args.idle_release, outage_limit=args.outage_limit
        )
        print(f"Runs are kept in {spec.shown} (worker {durable.worker}).", flush=True)  # noqa: T201
    options: dict[str, Any] = {"durable": durable, "max_runs": args.max_runs, "policy": policy}
    tool_policies = read_tool_policies(args.tool_policies)
    if args.workflow:
        workflows = apply_tool_policies(load_workflows(args.workflow), tool_policies)
        model = ", ".join(sorted({_model_name(w) for w in workflows.values()}))
        served = build_app(workflows, info={"model": model}, **options)
        await serve(served, args.host, args.port, on_ready=announce)
        return
    print("Starting the model…", flush=True)  # noqa: T201
    timeout = args.mcp_tool_timeout or MCP_TOOL_TIMEOUT
    demo = demo_workflows(args.prompt_cache, args.mcp, timeout)
    async with demo as (workflows, model):
        workflows = apply_tool_policies(workflows, tool_policies)
        served = build_app(workflows, info={"model": model}, **options)
        await serve(served, args.host, args.port, on_ready=announce)


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
    workflows: dict[str, Workflow], policies: Mapping[str, ToolPolicy]
) -> dict[str, Workflow]:
    """`workflows`, each compiler given `policies` (over the ones it has by name)."""
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    for workflow in workflows.values() if policies else ():
        if isinstance(workflow, LLMCompilerWorkflow):
            merged = {**(workflow.config.tool_policies or {}), **policies}
            workflow.config = workflow.config.model_copy(update={"tool_policies": merged})
    return workflows


def security_policy(args: argparse.Namespace) -> SecurityPolicy:
    """The policy the serve options ask for (a specific bind address is an allowed host)."""
    from llm_compiler.serving.security import SecurityPolicy

    token = args.token if args.token is not None else os.environ.get("LLM_COMPILER_TOKEN")
    hosts = list(args.allow_host)
    if args.host not in _WILDCARDS:
        hosts.append(args.host)
    return SecurityPolicy.build(token or None, args.allow_origin, hosts, args.insecure)


def _model_name(workflow: Workflow) -> str:
    """The model a workflow's LLM names (a compiler's planner and joiner model), if any."""
    llm = getattr(workflow, "llm", None)
    try:
        return str(llm.metadata.model_name) if llm is not None else type(workflow).__name__
    except Exception:  # an LLM without metadata still serves; the page shows its class
        return type(llm).__name__


def _announce(token: str | None, url: str) -> None:
    """Print the page's URL; with a token, in the fragment (the page keeps it, then drops it)."""
    for wildcard in ("//0.0.0.0:", "//[::]:"):  # a browser reaches those by a loopback name
        url = url.replace(wildcard, "//127.0.0.1:")
    if token:
        url += f"#token={quote(token, safe='')}"
    print(f"Serving the live plan page at {url}  (Ctrl-C to stop)", flush=True)  # noqa: T201


def parser() -> argparse.ArgumentParser:
    """The command-line parser."""
    top = argparse.ArgumentParser(prog="llm-compiler", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve workflows over HTTP with a live plan page")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="TCP port (default: %(default)s)")
    serve.add_argument(
        "--workflow",
        metavar="MODULE:ATTR",
        help="your LLMCompilerWorkflow, LLMCompilerAgent team, dict of them or a factory "
        "(default: the demo tools on the model resolve_llm() picks)",
    )
    serve.add_argument(
        "--mcp",
        action="append",
        default=[],
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
        default="memory",
        help="where runs are kept: memory, sqlite:///path.db (durable, one worker) or "
        "postgresql://... (durable, shared by every worker started on it) (default: %(default)s)",
    )
    serve.add_argument(
        "--idle-release",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="with a durable store, a run waiting for input (a plan approval) leaves memory "
        "after this long; the next event loads it on any worker (default: %(default)s)",
    )
    serve.add_argument(
        "--outage-limit",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="with a durable store, how long a worker rides out an unreachable database "
        "(reconnecting with backoff; /health says degraded) before it stops (default: %(default)s)",
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
        help="bearer token every API request and event stream must carry (default: "
        "$LLM_COMPILER_TOKEN; none on loopback). The printed URL hands it to the page once.",
    )
    serve.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="URL",
        help="let web pages of this origin call the API (repeatable; default: only the "
        "server's own page)",
    )
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="accept requests naming this host (repeatable; loopback names and the bind "
        "address always; * for any, e.g. behind a proxy that checks it)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
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
        "--prompt-cache",
        action="store_true",
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
    return top


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds above 0, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``llm-compiler`` console script."""
    args = parser().parse_args(argv)
    # uvicorn re-raises a caught SIGTERM after its shutdown; by default that would end the
    # process before the embedded model server is stopped. As Ctrl-C, it unwinds instead.
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        asyncio.run(run_server(args))
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
