"""Seconds of training until the base model meets the bar, per seed.

The bar: greedy forced-format accuracy >= 0.99 for S and T at every k = 2..8 and for A at k = 2,
on 500 problems per k. Every `--every` steps training pauses for a cheap check on 100 problems per k; when that
passes, the full 500-per-k check decides. Evaluation time is not counted as training time. Training always runs
the whole recipe; with the default recipe the result is stored in the model cache as base-seed<seed>, exactly
what `get_model` / `reasonlab pretrain` would have trained.

    python benchmarks/time_to_quality.py --seeds 0 1 2 3 4
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from reasonlab.core.evaluate import eval_table, format_table, meets_bar, passes_bar
from reasonlab.core.problems import problems_per_k
from reasonlab.io.checkpoint import write_json
from reasonlab.runner.executor import keep_freed_memory
from reasonlab.train.sft import BASE_CFG, SPEC_CFG, pretrain
from reasonlab.train.zoo import store


def bar_met(model, n: int, seed: int = 777) -> bool:
    """Forced S and T >= 0.99 at every k, forced A >= 0.99 at k = 2, on n problems per k."""
    return meets_bar(model, problems_per_k(n, seed), problems_per_k(n, seed, ks=[2]))


def run(cfg: dict, every: int, store_as: str | None = None) -> dict:
    state = {"eval": 0.0, "hit": None, "step": None}
    t0 = time.perf_counter()

    def check(step, model):
        t = time.perf_counter()
        trained = t - t0 - state["eval"]
        ok = state["hit"] is None and bar_met(model, 100) and bar_met(model, 500, seed=4242)
        state["eval"] += time.perf_counter() - t
        if ok:
            state["hit"], state["step"] = trained, step
        return False  # keep training: the cached model is the full recipe's

    stats = {}
    model = pretrain(cfg, callback=check, every=every, stats=stats, log=print)
    train_s = time.perf_counter() - t0 - state["eval"]   # a gated phase's own tests count as training
    steps = sum(stats["phase_steps"])
    if state["hit"] is None and bar_met(model, 500, seed=4242):   # met only at the end of the schedule
        state["hit"], state["step"] = train_s, steps
    if store_as:
        store(store_as, cfg, model, train_seconds=round(train_s, 2), phase_steps=stats["phase_steps"])
    table = eval_table(model, 500)
    summary = {c: {"acc_by_k": {k: v["acc"] for k, v in t["per_k"].items()}, "share": t["share"], "length": t["length"]}
               for c, t in table.items()}
    return {"seed": cfg["seed"], "time_to_quality_s": state["hit"], "step": state["step"], "steps": steps,
            "phase_steps": stats["phase_steps"], "train_s": round(train_s, 1),
            "passes": passes_bar(table), "table": format_table(table), "summary": summary}


def markdown(runs: list[dict]) -> str:
    """Per k: forced A/S/T and free accuracy (mean and min over seeds); the free format shares; then times."""
    ks = list(runs[0]["summary"]["free"]["acc_by_k"])
    out = ["| k | forced A | forced S | forced T | free (greedy) |", "|---|---|---|---|---|"]
    for k in ks:
        cells = []
        for c in ("A", "S", "T", "free"):
            xs = [r["summary"][c]["acc_by_k"][k] for r in runs]
            cells.append(f"{sum(xs) / len(xs):.3f} (min {min(xs):.3f})")
        out.append(f"| {k} | " + " | ".join(cells) + " |")
    share = {f: [r["summary"]["free"]["share"][f] for r in runs] for f in ("direct", "short", "full")}
    out.append("")
    out.append("Free generation's format share A / S / T, per seed: "
               + "; ".join(f"{share['direct'][i]:.2f} / {share['short'][i]:.2f} / {share['full'][i]:.2f}"
                           for i in range(len(runs))) + ".")
    out += ["", "| seed | passes the bar | time-to-quality (s) | at step | steps per phase | whole recipe (s) |",
            "|---|---|---|---|---|---|"]
    for r in runs:
        ttq = f"{r['time_to_quality_s']:.1f}" if r["time_to_quality_s"] is not None else "not met"
        out.append(f"| {r['seed']} | {'yes' if r['passes'] else 'no'} | {ttq} | {r['step']} | "
                   f"{' + '.join(map(str, r['phase_steps']))} | {r['train_s']:.1f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--every", type=int, default=100, help="steps between checks")
    ap.add_argument("--spec", action="store_true", help="the spec's recipe instead of BASE_CFG")
    ap.add_argument("--cfg", type=str, default=None, help="a recipe as JSON (overrides BASE_CFG keys)")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--out", default="runs/bench/base_model", help="write <out>.json and <out>.md ('' for none)")
    args = ap.parse_args()
    keep_freed_memory()   # as `reasonlab pretrain` runs (REASONLAB_MALLOC=default: glibc's settings)
    if args.threads:
        torch.set_num_threads(args.threads)
    base = dict(SPEC_CFG if args.spec else BASE_CFG)
    if args.cfg:
        base.update(json.loads(args.cfg))
    runs = []
    for seed in args.seeds:
        default = not args.spec and not args.cfg
        r = run(dict(base, seed=seed), args.every, store_as=f"base-seed{seed}" if default else None)
        runs.append(r)
        print(json.dumps({k: v for k, v in r.items() if k not in ("table", "summary")}), flush=True)
        print(r["table"], flush=True)
    md = markdown(runs)
    print(md)
    if args.out:
        write_json(args.out + ".json", [{k: v for k, v in r.items() if k != "table"} for r in runs])
        with open(args.out + ".md", "w") as f:
            f.write(md + "\n")


if __name__ == "__main__":
    main()
