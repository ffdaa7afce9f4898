"""The allocator setting (`executor.keep_freed_memory`) against glibc's own, in alternating processes.

A setting of the process cannot be switched back inside one, so each round starts two processes, one with
REASONLAB_MALLOC=default and one without, and each times the same four workloads (medians of `--reps`): 60 training
steps of the base recipe's phase 2 at batch 64 (ms a step), a 15-step GRPO run with the spec's defaults (ms a step),
4096 forced-T greedy prompts and 4096 free samples (ms), and counts its minor page faults.

    python benchmarks/allocator.py [--rounds 3] [--reps 3]
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

WORKLOADS = ("train", "rl", "forced_t", "free")


def child(reps: int) -> dict:
    import numpy as np
    import torch
    from common import MALLOC_KEPT

    from reasonlab.core.sampling import generate
    from reasonlab.core.task import K_MAX, K_MIN, make_digits, prompt_ids
    from reasonlab.train.rl import RLConfig, train
    from reasonlab.train.sft import build_model, make_sequences, split_targets, train_on_batches
    from reasonlab.train.zoo import base_model

    base = base_model(0, log=None)
    rng = np.random.default_rng(0)
    batches = [split_targets(make_sequences(rng, 64, (0.0, 0.8, 0.2), (K_MIN, K_MAX))) for _ in range(60)]
    r = random.Random(0)
    prompts = [prompt_ids(make_digits(r, r.randint(2, 8))) for _ in range(4096)]

    def timed(fn, per=1):
        t = time.perf_counter()
        fn()
        return (time.perf_counter() - t) / per * 1000

    runs = {
        "train": lambda: timed(lambda: train_on_batches(build_model(0), lambda s: batches[s], 60, log=None), 60),
        "rl": lambda: timed(lambda: train(copy.deepcopy(base), base, RLConfig(steps=15, seed=0), log=None), 15),
        "forced_t": lambda: timed(lambda: generate(base, prompts, None, 0.0, ["T"])),
        "free": lambda: timed(lambda: generate(base, prompts, torch.Generator().manual_seed(0), 1.0)),
    }
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    times = {w: [] for w in WORKLOADS}
    for _ in range(reps):
        for w in WORKLOADS:
            times[w].append(runs[w]())
    return {"kept": MALLOC_KEPT, **{w: round(statistics.median(v), 1) for w, v in times.items()},
            "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.reps)))
        return
    rows = []
    for _ in range(args.rounds):
        for setting in ("default", ""):
            env = {**os.environ, "REASONLAB_MALLOC": setting}
            out = subprocess.run([sys.executable, __file__, "--child", "--reps", str(args.reps)], env=env,
                                 capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)
    for kept in (False, True):
        mine = [r for r in rows if r["kept"] == kept]
        print(("kept freed memory" if kept else "glibc's settings ") + ": "
              + ", ".join(f"{w} {statistics.median(r[w] for r in mine):.1f}" for w in WORKLOADS)
              + f" (ms), minor faults {statistics.median(r['faults'] for r in mine):.0f}")


if __name__ == "__main__":
    main()
