"""RL results for the README: GRPO vs the spec's REINFORCE (no baseline) vs Dr. GRPO, from the base model, 3 seeds.

For each algorithm and seed: the base model of that seed (cached), RL with the spec's defaults (16 problems x 8
samples, lr 3e-5, beta 0.04, clip 0.2, 2 inner updates) unless flags say otherwise, a greedy evaluation on 100
problems per k every --eval-every steps (time-to-solve = first evaluation with accuracy >= 0.99; seconds count
training only), and a final greedy evaluation on 500 problems per k.

    python experiments/rl_results.py --seeds 0 1 2 --algos grpo reinforce dr_grpo --steps 200
Writes results/rl/{summary.json, table.md, curves.png, formats_<algo>.png}.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import time

from reasonlab.checkpoint import get_model, write_json
from reasonlab.evaluate import evaluate, problems_per_k
from reasonlab.report import mean_std, plot_format_share, plot_rl_runs
from reasonlab.rl import RLConfig, train
from reasonlab.train import BASE_CFG


def one_run(algo: str, seed: int, steps: int, every: int, lr: float | None) -> dict:
    base = get_model(f"base-seed{seed}", dict(BASE_CFG, seed=seed), log=None)
    policy = copy.deepcopy(base)
    over = {"learning_rate": lr} if lr else {}
    cfg = RLConfig.preset(algo, steps=steps, seed=seed, log_every=0, **over)
    probe = problems_per_k(100, seed=999)
    state = {"eval_s": 0.0, "solved": None, "curve": []}
    t0 = time.perf_counter()

    def check(step, model):
        t = time.perf_counter()
        r = evaluate(model, probe)
        state["curve"].append({"step": step, "acc": r["acc"], "length": r["length"], "share": r["share"]})
        if state["solved"] is None and r["acc"] >= 0.99:
            state["solved"] = {"step": step, "seconds": round(t - t0 - state["eval_s"], 1)}
        state["eval_s"] += time.perf_counter() - t

    # the reference is always passed so KL is logged; with beta = 0 (REINFORCE) it does not enter the loss
    hist = train(policy, copy.deepcopy(base), cfg, callback=check, every=every, log=None)
    train_s = time.perf_counter() - t0 - state["eval_s"]
    final = evaluate(policy, problems_per_k(500, seed=12345))
    start = evaluate(base, problems_per_k(500, seed=12345))
    tail = hist[-10:]
    sampled = {key: sum(h[key] for h in tail) / len(tail) for key in ("acc", "length", "kl_exact", "entropy")}
    sampled["direct"] = sum(h["share"]["direct"] for h in tail) / len(tail)
    return {"algo": algo, "seed": seed, "steps": steps, "train_s": round(train_s, 1), "solved": state["solved"],
            "sampled_last10": sampled,
            "base_acc": start["acc"], "acc": final["acc"], "share": final["share"], "length": final["length"],
            "acc_by_k": {k: v["acc"] for k, v in final["per_k"].items()},
            "share_by_k": {k: v["share"] for k, v in final["per_k"].items()}, "curve": state["curve"], "hist": hist}


def table(runs: list[dict]) -> str:
    rows = ["| algo | greedy acc (k = 2..8) | min over k | greedy share A / S / T | greedy length | solved (acc ≥ 0.99) "
            "| steps to solve | seconds to solve | sampled acc, last 10 steps | sampled share A | KL to base (exact) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for algo in dict.fromkeys(r["algo"] for r in runs):
        rs = [r for r in runs if r["algo"] == algo]
        def ms(xs, f="{:.3f}"):
            m, s = mean_std(xs)
            return f"{f.format(m)} ± {f.format(s)}"
        solved = [r for r in rs if r["solved"]]
        steps = ms([r["solved"]["step"] for r in solved], "{:.0f}") if solved else "—"
        secs = ms([r["solved"]["seconds"] for r in solved], "{:.1f}") if solved else "—"
        share = " / ".join(ms([r["share"][f] for r in rs], "{:.2f}") for f in ("direct", "short", "full"))
        rows.append(f"| {algo} | {ms([r['acc'] for r in rs])} | {ms([min(r['acc_by_k'].values()) for r in rs])} | {share} "
                    f"| {ms([r['length'] for r in rs], '{:.2f}')} | {len(solved)}/{len(rs)} | {steps} | {secs} "
                    f"| {ms([r['sampled_last10']['acc'] for r in rs])} | {ms([r['sampled_last10']['direct'] for r in rs], '{:.2f}')} "
                    f"| {ms([r['sampled_last10']['kl_exact'] for r in rs], '{:.3f}')} |")
    base = [r["base_acc"] for r in runs if r["algo"] == runs[0]["algo"]]
    m, s = mean_std(base)
    rows.append(f"\nBase model (free, greedy): accuracy {m:.3f} ± {s:.3f}. Chance: 0.1. Mean ± std over seeds "
                f"{sorted({r['seed'] for r in runs})}.")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", default=["grpo", "reinforce", "dr_grpo"])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=None, help="override every algorithm's learning rate")
    ap.add_argument("--out", default="results/rl")
    args = ap.parse_args()
    runs = []
    for algo in args.algos:
        for seed in args.seeds:
            r = one_run(algo, seed, args.steps, args.eval_every, args.lr)
            runs.append(r)
            print(json.dumps({k: v for k, v in r.items() if k not in ("hist", "curve", "share_by_k")}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    write_json(os.path.join(args.out, "summary.json"), [{k: v for k, v in r.items() if k != "hist"} for r in runs])
    md = table(runs)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    plot_rl_runs({a: [r["hist"] for r in runs if r["algo"] == a] for a in args.algos}, os.path.join(args.out, "curves.png"),
                 "RL from the base model (mean over seeds; band = min..max)")
    for a in args.algos:
        plot_format_share(next(r["hist"] for r in runs if r["algo"] == a), os.path.join(args.out, f"formats_{a}.png"),
                          f"{a}, seed {args.seeds[0]}")


if __name__ == "__main__":
    main()
