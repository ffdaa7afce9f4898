"""Shared by the benchmark scripts (run as `python benchmarks/<name>.py`, so this directory is on sys.path)."""
import os
import time

import torch


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


def load_note() -> str:
    """The conditions of a timing: threads and the machine's load average (other work skews wall-clock times;
    ratios taken in turns less so)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"torch {torch.__version__}, {torch.get_num_threads()} threads, {os.cpu_count()} cores, "
            f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f} (1 / 5 / 15 min) at the end")
