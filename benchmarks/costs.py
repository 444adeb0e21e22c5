"""How the durable benchmarks take and derive their costs (standard library only: the
LangGraph comparison, in its own venv, uses it too).

From run latencies of plans of 1 and of 9 parallel tasks, L(1) and L(9), per store: per
extra parallel task = (L(9) - L(1)) / 8, per run = L(1) - per task; a store's extras and
its 1-task ratio are over a base store's; 90 % intervals come from a bootstrap over rounds.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Awaitable, Callable

Point = tuple[str, int]
"""A measured point: (store, tasks)."""
#: Untimed runs of each point before the timed ones.
WARM_UP = 2


async def interleave(
    points: dict[Point, Callable[[str], Awaitable[None]]],
    runs: int,
    probes: dict[Point, Callable[[], float]] | None = None,
    settle: dict[Point, Callable[[], Awaitable[None]]] | None = None,
) -> tuple[dict[Point, list[float]], dict[Point, float]]:
    """Seconds of each run of every point, taken round by round (one run of each point per
    round, the order rotating), so drift on a shared machine lands on all points alike.

    :data:`WARM_UP` runs per point first. `probes` read a counter (CPU seconds) before and after
    each timed run of their point, outside the timing; their summed deltas are returned.
    `settle` is awaited after each run of its point, untimed but probed (a journal's commit
    that would otherwise land in the next point's run).
    """
    keys = list(points)
    for key in keys:
        for i in range(WARM_UP):
            await points[key](f"warm-{i}")
    samples: dict[Point, list[float]] = {key: [] for key in keys}
    probed: dict[Point, float] = dict.fromkeys(probes or {}, 0.0)
    for r in range(runs):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            probe = (probes or {}).get(key)
            before = probe() if probe else 0.0
            start = time.perf_counter()
            await points[key](f"q{r}")
            samples[key].append(time.perf_counter() - start)
            if settle and key in settle:
                await settle[key]()
            if probe:
                probed[key] += probe() - before
    return samples, probed


def summarize(
    samples: dict[Point, list[float]], base: str = "memory", resamples: int = 2000
) -> dict[str, dict[str, float]]:
    """Medians (ms), the derived costs over `base`, and 90 % intervals of the extra per
    parallel task and of the 1-task ratio: a bootstrap over rounds (one round's runs of all
    points drawn together, keeping the pairing the interleaving made)."""
    names = list(dict.fromkeys(name for name, _ in samples))
    runs = min(len(v) for v in samples.values())

    def derived(pick: list[int]) -> dict[str, tuple[float, float]]:
        med = {k: statistics.median(v[i] for i in pick) * 1000 for k, v in samples.items()}
        per_task = {n: (med[n, 9] - med[n, 1]) / 8 for n in names}
        return {n: (per_task[n] - per_task[base], med[n, 1] / med[base, 1]) for n in names}

    rows: dict[str, dict[str, float]] = {}
    for name in names:
        rows[name] = {
            "L1_ms": statistics.median(samples[name, 1]) * 1000,
            "L9_ms": statistics.median(samples[name, 9]) * 1000,
        }
    derive(rows, base)
    rng = random.Random(0)
    draws = [derived([rng.randrange(runs) for _ in range(runs)]) for _ in range(resamples)]
    for name in names:
        for j, field in enumerate(("extra_per_task_ms", "ratio_1_task")):
            values = sorted(d[name][j] for d in draws)
            rows[name][f"{field}_lo"] = values[int(0.05 * resamples)]
            rows[name][f"{field}_hi"] = values[int(0.95 * resamples) - 1]
    return rows


def derive(rows: dict[str, dict[str, float]], base: str = "memory") -> None:
    """Per task, per run, extras over memory, ratio and runs/s per core, in place."""
    for row in rows.values():
        row["per_task_ms"] = (row["L9_ms"] - row["L1_ms"]) / 8
        row["per_run_ms"] = row["L1_ms"] - row["per_task_ms"]
    for row in rows.values():
        row["extra_per_task_ms"] = row["per_task_ms"] - rows[base]["per_task_ms"]
        row["extra_per_run_ms"] = row["per_run_ms"] - rows[base]["per_run_ms"]
        row["ratio_1_task"] = row["L1_ms"] / rows[base]["L1_ms"]
        if "worker_cpu_ms" in row:
            row["runs_per_s_per_core"] = 1000 / (row["worker_cpu_ms"] + row["db_cpu_ms"])


def interval(row: dict[str, float], field: str, spec: str) -> str:
    """`(lo to hi)` of a 90 % interval, if the row has one."""
    if f"{field}_lo" not in row or row[f"{field}_lo"] == row[f"{field}_hi"]:
        return ""
    return f"({row[f'{field}_lo']:{spec}} to {row[f'{field}_hi']:{spec}})"


def table(rows: dict[str, dict[str, float]], cpu_of: str = "server") -> str:
    lines = [
        "| store | 1-task run | 9-task run | extra per parallel task | extra per run | 1-task vs "
        f"memory | {cpu_of} CPU/run | database CPU/run | runs/s per core |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        cpu_cols = "| |"
        if "worker_cpu_ms" in r:
            cpu_cols = f"{r['worker_cpu_ms']:.1f} ms | {r['db_cpu_ms']:.1f} ms | "
            cpu_cols += f"{r['runs_per_s_per_core']:.0f}"
        lines.append(
            f"| {name} | {r['L1_ms']:.1f} ms | {r['L9_ms']:.1f} ms | "
            f"{r['extra_per_task_ms']:+.2f} ms {interval(r, 'extra_per_task_ms', '+.1f')} | "
            f"{r['extra_per_run_ms']:+.1f} ms | "
            f"{r['ratio_1_task']:.2f}x {interval(r, 'ratio_1_task', '.2f')} | {cpu_cols} |"
        )
    return "\n".join(lines)
