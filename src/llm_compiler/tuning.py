"""What a host process that runs many runs at once may set: :func:`tune_for_many_runs`.

The library never changes its host's process-wide settings by itself; ``llm-compiler
serve`` calls this at start-up, and an application of its own can do the same.
"""

from __future__ import annotations

import gc

#: Allocations between two young-generation collections once tuned (Python's default: 700).
MANY_RUNS_GC_YOUNG = 50_000


def tune_for_many_runs(young: int = MANY_RUNS_GC_YOUNG) -> None:
    """Set this process's garbage collector up for many runs at once.

    Call it once the host has loaded its libraries and built its workflows: what exists
    then (some hundred thousand objects) is collected once and frozen out of the
    collector's reach (``gc.freeze()``), so a collection under load walks only what the
    runs hold; and the young generation is collected every `young` allocations instead
    of every 700, which makes the older generations' collections (each walks every live
    run's objects) as much rarer. The price is memory: cyclic garbage waits longer for
    its collection. Calling it again freezes what was built since and sets the same
    thresholds. Undo: ``gc.unfreeze()`` and ``gc.set_threshold(700, 10, 10)``.
    """
    if young < 1:
        raise ValueError(f"young must be at least 1, not {young}")
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, old)
