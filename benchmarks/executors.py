"""Executors: the lab on 1 local worker against 2 (one run), a tiny sweep on local Ray against the local executor,
and a paper estimate for a 64-CPU cluster from measured unit times.

    python benchmarks/executors.py lab      [--seeds 0 1] [--workers 2]   # quick lab, workers=1 then workers=N
    python benchmarks/executors.py sweep    [--workers 2]                 # tiny sweep: local x1, local xN, Ray xN
    python benchmarks/executors.py estimate [--timing results/lab/timing.json] [--adaptive runs/adaptive/summary.json]

Each prints a table and writes JSON next to it (--json). Base models are trained into a private cache before the
clock starts (--cache, default /tmp/reasonlab-bench-cache), so both sides of a comparison load the same models.
Timings on a machine shared with other jobs are noisy: compare ratios measured in one run, on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from reasonlab.io.checkpoint import write_json  # noqa: E402
from reasonlab.runner import (
    lab,  # noqa: E402
    sweep,
)
from reasonlab.runner.executor import ExecConfig  # noqa: E402
from reasonlab.train.sft import base_cfg, base_name  # noqa: E402
from reasonlab.train.zoo import cached_model


def bench_lab(args) -> dict:
    for s in args.seeds:      # not timed: both runs load these from the cache
        cached_model(base_name(s, True), base_cfg(s, True), cache=args.cache, log=print)
    out = {}
    for w in (1, args.workers):
        cfg = lab.LabConfig(seeds=tuple(args.seeds), quick=True, out=os.path.join(args.scratch, f"lab-w{w}"),
                            cache_dir=args.cache, fresh=True,
                            execution=ExecConfig(workers=w, threads=1 if w > 1 else 0))
        t = time.perf_counter()
        lab.run(cfg, log=lambda s: None)
        out[f"workers={w}"] = round(time.perf_counter() - t, 1)
        with open(os.path.join(cfg.out, "timing.json")) as f:
            out[f"units workers={w}"] = json.load(f)["ran"]
        print(f"quick lab, seeds {args.seeds}, {w} worker(s): {out[f'workers={w}']:.1f}s", flush=True)
    out["speedup"] = round(out["workers=1"] / out[f"workers={args.workers}"], 2)
    print(f"speedup {args.workers} workers / 1: {out['speedup']:.2f}x  (load average now {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs)")
    return out


def bench_sweep(args) -> dict:
    import ray
    grid = {"algos": [("grpo",), ("rloo",)]}
    fixed = {"steps": args.steps, "n_test": 50}
    for s in (0, 1):
        cached_model(base_name(s, True), base_cfg(s, True), cache=args.cache, log=None)
    out = {}
    t = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, object_store_memory=200 * 2 ** 20, log_to_driver=False)
    out["ray.init"] = round(time.perf_counter() - t, 1)
    try:
        for name, ex in (("local x1", ExecConfig()), (f"local x{args.workers}", ExecConfig(workers=args.workers, threads=1)),
                         (f"ray x{args.workers}", ExecConfig("ray", args.workers)),
                         (f"ray x{args.workers} (warm workers)", ExecConfig("ray", args.workers))):
            cfg = sweep.SweepConfig(exp="rl", grid=grid, fixed=fixed, seeds=(0, 1), quick=True, cache_dir=args.cache,
                                    out=os.path.join(args.scratch, "sweep-" + name.replace(" ", "")), fresh=True,
                                    execution=ex)
            t = time.perf_counter()
            s = sweep.run(cfg, log=None)
            out[name] = round(time.perf_counter() - t, 1)
            out[name + " unit seconds"] = [r["seconds"] for r in s["cells"]]
            print(f"quick rl sweep (2 cells x 2 seeds, {args.steps} RL steps each) on {name}: {out[name]:.1f}s",
                  flush=True)
    finally:
        t = time.perf_counter()
        ray.shutdown()
        out["ray.shutdown"] = round(time.perf_counter() - t, 1)
    print(f"ray.init {out['ray.init']}s, ray.shutdown {out['ray.shutdown']}s (load average {os.getloadavg()[0]:.1f})")
    return out


def estimate(args, cpus: int = 64, overhead_s: float = 10.0) -> dict:
    """Sequential time = sum of units; on `cpus` CPUs every unit runs at once, so the wall time is the critical
    path: the slowest base model, then the slowest unit, plus a start-up overhead (Ray up, workers import torch)."""
    with open(args.timing) as f:
        t = json.load(f)
    ran = t["ran"]
    seeds = t["seeds"]
    units = {k: v for k, v in ran.items() if "/seed" in k and not k.startswith("base-model/")}
    bases = [v for k, v in ran.items() if k.startswith("base-model/")]    # one unit each
    base_each = max(bases) if bases else ran.get("base models", 0.0) / max(1, len(seeds))
    longest = max(units, key=units.get)
    lab_seq = round(sum(units.values()) + (sum(bases) if bases else ran.get("base models", 0.0)), 1)   # one CPU
    lab_par = base_each + units[longest] + overhead_s
    out = {"lab": {"units": len(units) + len(seeds), "sequential_s": lab_seq, "base_model_s": round(base_each, 1),
                   "longest_unit": longest, "longest_unit_s": units[longest],
                   "critical_path_s": round(base_each + units[longest], 1),
                   f"expected_wall_s_{cpus}cpu": round(lab_par, 1), "speedup": round(lab_seq / lab_par, 1)}}
    with open(args.adaptive) as f:
        a = json.load(f)
    per_method = {}
    for r in a["runs"]:
        per_method.setdefault(r["method"], []).append(r["seconds"])
    n = sum(len(v) for v in per_method.values())
    seq = sum(sum(v) for v in per_method.values())
    slowest = max(max(v) for v in per_method.values())
    out["adaptive_sweep"] = {"units": n, "methods": len(per_method), "seeds": len(a["seeds"]), "steps": a.get("steps"),
                             "sequential_s": round(seq, 1), "longest_unit_s": slowest,
                             "critical_path_s (bases cached)": round(slowest, 1),
                             f"expected_wall_s_{cpus}cpu (bases cached)": round(slowest + overhead_s, 1),
                             f"expected_wall_s_{cpus}cpu (bases trained)": round(base_each + slowest + overhead_s, 1),
                             "speedup (bases cached)": round(seq / (slowest + overhead_s), 1)}
    print(json.dumps(out, indent=1))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["lab", "sweep", "estimate"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cache", default="/tmp/reasonlab-bench-cache")
    ap.add_argument("--scratch", default="/tmp/reasonlab-bench")
    ap.add_argument("--timing", default="results/lab/timing.json")
    ap.add_argument("--adaptive", default="runs/adaptive/summary.json")
    ap.add_argument("--json", default=None, help="write the figures here too")
    args = ap.parse_args()
    res = {"lab": bench_lab, "sweep": bench_sweep, "estimate": estimate}[args.what](args)
    res["measured_at"] = time.strftime("%Y-%m-%d %H:%M:%S")
    res["cpus"], res["load_average_1min"] = os.cpu_count(), round(os.getloadavg()[0], 2)
    if args.json:
        write_json(args.json, res)


if __name__ == "__main__":
    main()
