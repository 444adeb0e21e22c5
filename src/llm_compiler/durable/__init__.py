"""Durable runs: the engine on the in-memory workflow runtime, its facts in a journal.

Served: ``llm-compiler serve --store postgresql://...`` (any number of workers sharing the
runs) or ``--store sqlite:///runs.db`` (one worker). In your own process,
:func:`durable_runtime`::

    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.durable import durable_runtime

    runtime = durable_runtime("sqlite:///runs.sqlite")      # or postgresql://user@host/db
    wf = LLMCompilerWorkflow(tools=..., llm=..., runtime=runtime, workflow_name="agent")
    await runtime.launch()            # resumes the runs a dead process left unfinished
    answer = await wf.run(user_msg="...", run_id="order-42")
    await runtime.destroy()

What is kept (:mod:`.journal`): each run's row, its facts (each round's plan, each task's
first result, the scheduler's journal, the verdicts and the answer: :mod:`.facts`) and
its event stream. A run is resumed by folding its facts into its state
(:mod:`.recovery`); nothing recorded runs again, a call in flight at a crash runs at most
once more. Needs the ``durable`` extra (``pip install 'llm-compiler[durable]'``).
"""

from __future__ import annotations

from llm_compiler._extras import lazy_exports, require

_NEEDED = {"asyncpg": "asyncpg"}


def check_installed() -> None:
    """Raise a one-line :class:`ConfigurationError` naming what the durable extra lacks."""
    require("A durable store needs", "durable", _NEEDED)


_EXPORTS = {
    "Durable": "backend",
    "DurableConfig": "config",
    "Journal": "journal",
    "open_durable": "store",
    "durable_runtime": "local",
    "at_most_once": "runtime",
    "RunResumed": "events",
    "StoreSpec": "spec",
    "parse_store": "spec",
}


#: Import a part on first use, after checking the ``durable`` extra is there (the parts
#: that only parse or describe need none of it).
__getattr__ = lazy_exports(__name__, _EXPORTS, check_installed, ("spec", "events", "config"))


__all__ = [*_EXPORTS, "check_installed"]
