"""Shared by the benchmark scripts (run as `python benchmarks/<name>.py`, so this directory is on sys.path)."""
import time


def best_time(fn, repeats: int) -> float:
    """Shortest of `repeats` wall-clock runs of fn(): the least disturbed by a noisy machine."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)
