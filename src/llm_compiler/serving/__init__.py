"""Serve compiler workflows over HTTP with a live plan-DAG page (extra: ``serve``).

Example::

    from llm_compiler.serving import build_app, serve

    served = build_app({"compiler": LLMCompilerWorkflow(tools=[...], llm=llm)})
    await serve(served, host="127.0.0.1", port=8000)   # or uvicorn.run(served.app)

    # Beyond loopback: a token (and the names clients use), see SecurityPolicy.
    policy = SecurityPolicy.build(token=token, allow_hosts=["box.lan"])
    await serve(build_app(workflows, policy=policy), host="0.0.0.0")

Routes: the page at ``/``, ``/api/info``, ``/agui/{name}`` and llama-agents-server's
workflow API (``/workflows/{name}/run-nowait``, ``/events/{handler_id}``, ``/handlers``, ...).
"""

from __future__ import annotations

from llm_compiler._extras import lazy_exports, require

_NEEDED = {"llama_agents.server": "llama-agents-server", "ag_ui": "ag-ui-protocol"}


def _check_installed() -> None:
    require("Serving needs", "serve", _NEEDED)


_EXPORTS = {
    "COMPILER": "app",
    "DEMO_QUESTION": "app",
    "SecurityPolicy": "security",
    "ServedApp": "app",
    "build_app": "app",
    "make_store": "app",
    "serve": "server",
}


#: Import the serving API on first use, after checking the ``serve`` extra is there.
__getattr__ = lazy_exports(__name__, _EXPORTS, _check_installed)


__all__ = list(_EXPORTS)
