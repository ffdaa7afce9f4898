"""Shared by the benchmark scripts (run as `python benchmarks/<name>.py`, so this directory is on sys.path)."""
import time


def best_times(fns, repeats: int) -> list[float]:
    """Shortest of `repeats` wall-clock runs of each fn, the fns taking turns (a, b, a, b, ...) so that a slow
    spell of a noisy machine falls on both sides of a comparison, not on one."""
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t)
    return best
