"""``tune_for_many_runs``: the garbage collector set up for many runs at once, on request."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from llm_compiler import tune_for_many_runs
from llm_compiler.tuning import MANY_RUNS_GC_YOUNG


@pytest.fixture
def collector() -> Iterator[None]:
    """Python's defaults while the test runs; the process's own settings afterwards."""
    before = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_importing_the_library_leaves_the_collector_alone():
    import subprocess
    import sys

    code = "import gc, llm_compiler; print(gc.get_freeze_count(), gc.get_threshold())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=1) == ["0", "(700, 10, 10)\n"]


def test_it_freezes_what_exists_and_collects_young_objects_less_often(collector):
    tune_for_many_runs()
    assert gc.get_freeze_count() > 10_000
    assert gc.get_threshold() == (MANY_RUNS_GC_YOUNG, 10, 10) and MANY_RUNS_GC_YOUNG > 700


def test_a_second_call_sets_the_same_and_freezes_what_came_since(collector):
    tune_for_many_runs()
    first = gc.get_freeze_count()
    kept = [[i] for i in range(1000)]  # containers the collector tracks
    tune_for_many_runs()
    assert gc.get_threshold() == (MANY_RUNS_GC_YOUNG, 10, 10)
    assert gc.get_freeze_count() >= first + len(kept)


def test_a_young_threshold_below_one_is_a_clear_error(collector):
    with pytest.raises(ValueError, match="at least 1"):
        tune_for_many_runs(0)
    assert gc.get_threshold() == (700, 10, 10) and gc.get_freeze_count() == 0
