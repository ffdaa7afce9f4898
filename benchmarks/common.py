"""Shared by the benchmark scripts (run as `python benchmarks/<name>.py`, so this directory is on sys.path)."""
import os
import time

import torch

from reasonlab.io.checkpoint import write_text
from reasonlab.runner.executor import keep_freed_memory

# the allocator setting the `reasonlab` command makes (REASONLAB_MALLOC=default measures without it): a baseline in
# the same process runs under it too
MALLOC_KEPT = keep_freed_memory()


def clock_for(name: str):
    """"wall": wall-clock time (the default); "cpu": this process's CPU time, for a machine shared with other
    work, where a single-threaded run's CPU time stays close to what it would take alone and its wall-clock time
    does not (meaningful with one thread only: with more it adds up the threads' time)."""
    if name == "cpu" and torch.get_num_threads() != 1:
        raise SystemExit("--clock cpu needs one thread (OMP_NUM_THREADS=1 or --threads 1)")
    return time.process_time if name == "cpu" else time.perf_counter


def best_times(fns, repeats: int, clock=time.perf_counter) -> list[float]:
    """Shortest of `repeats` runs of each fn (wall-clock, or `clock`), the fns taking turns (a, b, a, b, ...) so
    that a slow spell of a noisy machine falls on both sides of a comparison, not on one."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = clock()
            fn()
            best[i] = min(best[i], clock() - t)
    return best


def sgemm_peak(n: int = 2048, repeats: int = 5) -> float:
    """This machine's float32 matmul rate in GFLOP/s (best of `repeats` n x n products, the threads set). Machines of one
    kind differ by 2x or more in it, so an absolute time means little without this figure."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    return 2 * n ** 3 / min(best_times([lambda: a @ b], repeats)) / 1e9


def load_note(clock: str = "wall") -> str:
    """The conditions of a timing: the clock, threads, the machine's matmul rate and load average (other work skews
    wall-clock times; ratios taken in turns less so)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"{clock} clock, torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, "
            f"sgemm {sgemm_peak():.0f} GFLOP/s, "
            f"malloc {'keeps freed memory' if MALLOC_KEPT else 'as glibc sets it'}, "
            f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the end")


def report(lines: list[str], out: str) -> None:
    """Print a benchmark's lines and write them to `out` ('' for none) with the project's atomic writer."""
    print("\n".join(lines))
    if out:
        write_text(out, "\n".join(lines) + "\n")
